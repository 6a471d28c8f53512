// The memory model for mixtures of experts against the allocator: the bytes one
// micro-batch stashes through a forward and the weights the experts hold, exactly.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/gpt_stage.h"
#include "model/memory_model.h"
#include "runtime/bf16_emulation_ops.h"
#include "runtime/cpu/cpu_ops.h"
#include "runtime/memory_tracker.h"
#include "tests/trainer/layout_runs.h"
#include "trainer/config_validation.h"

namespace conveyor::testing_util {
namespace {

struct MoeCase {
  std::string name;
  std::vector<std::string> flags;  // on top of layout_runs' MoE model (capacity 1.25)
  bool bf16 = false;
};

const Ops* OpsFor(bool bf16) {
  static const Bf16EmulationOps* emulated = new Bf16EmulationOps(&CpuOps::Get());
  return bf16 ? static_cast<const Ops*>(emulated) : &CpuOps::Get();
}

Config MoeConfig(const MoeCase& mc) {
  Layout layout;
  layout.layers = 4;
  layout.moe = true;
  Config c = TinyConfig(layout);
  ModelConfig& m = *c.mutable_model();
  // Without dropping the permuted rows are exactly tokens x topk; padded to capacity,
  // exactly experts x capacity.
  m.set_moe_expert_capacity_factor(0);
  for (const std::string& flag : mc.flags) {
    if (flag == "swiglu_shared") {
      m.set_swiglu(true);
      m.set_moe_shared_expert_intermediate_size(16);
    } else if (flag == "padded") {
      m.set_moe_expert_capacity_factor(0.75f);
      m.set_moe_pad_expert_input_to_capacity(true);
    } else if (flag == "every_other_layer") {
      m.set_moe_layer_freq("2");
    } else if (flag == "selective_all") {
      c.mutable_recompute()->set_recompute_granularity("selective");
      for (const char* module : {"core_attn", "mlp", "layernorm"}) {
        c.mutable_recompute()->add_recompute_modules(module);
      }
    } else if (flag == "full_uniform_1") {
      c.mutable_recompute()->set_recompute_granularity("full");
      c.mutable_recompute()->set_recompute_method("uniform");
      c.mutable_recompute()->set_recompute_num_layers(1);
    }
  }
  c.mutable_precision()->set_bf16(mc.bf16);
  absl::StatusOr<Config> resolved = ResolveConfig(c, 1);
  EXPECT_TRUE(resolved.ok()) << resolved.status();
  return *resolved;
}

class MoeMemoryTest : public ::testing::TestWithParam<MoeCase> {};

TEST_P(MoeMemoryTest, ForwardStashAndWeightsAreWhatTheModelPredicts) {
  const Config config = MoeConfig(GetParam());
  const ModelShape shape = ModelShapeFromConfig(config, PaddedVocabSize(config));
  const int64_t weights_before = MemoryTracker::Global().live_bytes(MemoryCategory::kWeights);
  GptStage stage(shape, 1, nullptr, {}, {4}, RecomputePolicyFromConfig(config),
                 OpsFor(GetParam().bf16));
  const int64_t weights =
      MemoryTracker::Global().live_bytes(MemoryCategory::kWeights) - weights_before;
  stage.BeginStep(
      [&](int) -> absl::StatusOr<MicroBatchInput> {
        MicroBatchInput in;
        in.context = {1, 0, 1, shape.seq};
        for (int i = 0; i < shape.seq; ++i) in.tokens.push_back((7 * i) % 50);
        in.labels.assign(shape.seq, 5);
        return in;
      },
      shape.seq, LossWeighting());
  const int64_t before = MemoryTracker::Global().live_bytes(MemoryCategory::kActivations);
  ASSERT_TRUE(stage.Forward(0, 0, Tensor()).ok());
  const int64_t stashed = MemoryTracker::Global().live_bytes(MemoryCategory::kActivations) - before;
  pipeline::Timeline one_forward;
  one_forward.ranks = {{pipeline::TimedAction{pipeline::Forward(0), 0, 1}}};
  absl::StatusOr<std::vector<RankMemory>> predicted =
      PredictMemory(config, shape, one_forward, /*data_parallel_size=*/1);
  ASSERT_TRUE(predicted.ok()) << predicted.status();
  EXPECT_EQ(stashed, predicted->front().stash_bytes_per_micro_batch);
  EXPECT_EQ(weights, predicted->front().weight_bytes);
  int64_t parameters = 0;
  for (Parameter* p : stage.parameters()) parameters += p->local_numel();
  EXPECT_EQ(parameters, predicted->front().parameters);
  ASSERT_TRUE(stage.Backward(0, 0, Tensor()).ok());
}

INSTANTIATE_TEST_SUITE_P(Settings, MoeMemoryTest,
                         ::testing::Values(MoeCase{"gelu", {}},
                                           MoeCase{"swiglu_shared", {"swiglu_shared"}},
                                           MoeCase{"padded_to_capacity", {"padded"}},
                                           MoeCase{"every_other_layer", {"every_other_layer"}},
                                           MoeCase{"selective_all", {"selective_all"}},
                                           MoeCase{"full_uniform_1", {"full_uniform_1"}},
                                           MoeCase{"bf16_swiglu_shared", {"swiglu_shared"}, true}),
                         [](const ::testing::TestParamInfo<MoeCase>& test) {
                           return test.param.name;
                         });

}  // namespace
}  // namespace conveyor::testing_util
