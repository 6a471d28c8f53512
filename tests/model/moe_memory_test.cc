// The memory model for mixtures of experts against the allocator: the bytes one
// micro-batch stashes through a forward and the weights the experts hold, exactly.
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "model/gpt_stage.h"
#include "model/memory_model.h"
#include "runtime/bf16_emulation_ops.h"
#include "runtime/cpu/cpu_ops.h"
#include "runtime/memory_tracker.h"
#include "tests/model/one_forward_memory.h"
#include "tests/trainer/layout_runs.h"
#include "trainer/config/config_validation.h"

namespace conveyor::testing_util {
namespace {

struct MoeCase {
  std::string name;
  std::vector<std::string> flags;  // on top of layout_runs' MoE model (capacity 1.25)
  bool bf16 = false;
};

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
    } else if (flag == "router_fp32") {
      m.set_moe_router_dtype("fp32");
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
  const absl::StatusOr<ResolvedConfig> config = ResolvedConfig::Resolve(MoeConfig(GetParam()), 1);
  ASSERT_TRUE(config.ok()) << config.status();
  ExpectOneStageMatchesPrediction(*config, 4, GetParam().bf16);
}

INSTANTIATE_TEST_SUITE_P(Settings, MoeMemoryTest,
                         ::testing::Values(MoeCase{"gelu", {}},
                                           MoeCase{"swiglu_shared", {"swiglu_shared"}},
                                           MoeCase{"padded_to_capacity", {"padded"}},
                                           MoeCase{"every_other_layer", {"every_other_layer"}},
                                           MoeCase{"selective_all", {"selective_all"}},
                                           MoeCase{"full_uniform_1", {"full_uniform_1"}},
                                           MoeCase{"bf16_swiglu_shared", {"swiglu_shared"}, true},
                                           MoeCase{"bf16_router_fp32", {"router_fp32"}, true}),
                         [](const ::testing::TestParamInfo<MoeCase>& test) {
                           return test.param.name;
                         });

}  // namespace
}  // namespace conveyor::testing_util
