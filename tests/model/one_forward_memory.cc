#include "tests/model/one_forward_memory.h"

#include <utility>

#include "base/status_macros.h"
#include "gtest/gtest.h"
#include "model/parameter.h"
#include "parallel/pipeline/timeline.h"
#include "runtime/bf16_emulation_ops.h"
#include "runtime/cpu/cpu_ops.h"
#include "runtime/memory_tracker.h"

namespace conveyor::testing_util {

const Ops* CpuOpsFor(bool bf16) {
  static const Bf16EmulationOps* emulated = new Bf16EmulationOps(&CpuOps::Get());
  return bf16 ? static_cast<const Ops*>(emulated) : &CpuOps::Get();
}

absl::StatusOr<RankMemory> PredictOneForward(const ResolvedConfig& config) {
  pipeline::Timeline one_forward;
  one_forward.ranks = {{pipeline::TimedAction{pipeline::Forward(0), 0, 1}}};
  ASSIGN_OR_RETURN(const std::vector<RankMemory> predicted,
                   PredictMemory(MemoryInputsOf(config), config.model_shape(), one_forward));
  return predicted.front();
}

absl::StatusOr<int64_t> StashOfOneForward(GptStage* stage, const ModelShape& shape,
                                          std::vector<int32_t> tokens) {
  stage->BeginStep(
      [&](int) -> absl::StatusOr<MicroBatchInput> {
        MicroBatchInput in;
        in.context = {1, 0, 1, shape.seq};
        in.tokens = tokens;
        in.labels.assign(shape.seq, 5);
        return in;
      },
      shape.seq, LossWeighting());
  const int64_t before = MemoryTracker::Global().live_bytes(MemoryCategory::kActivations);
  RETURN_IF_ERROR(stage->Forward(0, 0, Tensor()).status());
  return MemoryTracker::Global().live_bytes(MemoryCategory::kActivations) - before;
}

void ExpectOneStageMatchesPrediction(const ResolvedConfig& config, int layers, bool bf16) {
  const ModelShape& shape = config.model_shape();
  const int64_t weights_before = MemoryTracker::Global().live_bytes(MemoryCategory::kWeights);
  const TensorParallel one_rank;
  GptStage stage(CpuOpsFor(bf16), shape, 1, &one_rank, {}, {layers}, config.recompute_policy());
  const int64_t weights =
      MemoryTracker::Global().live_bytes(MemoryCategory::kWeights) - weights_before;
  std::vector<int32_t> tokens;  // varied, so that a router spreads them
  for (int i = 0; i < shape.seq; ++i) tokens.push_back((7 * i) % 50);
  const absl::StatusOr<int64_t> stashed = StashOfOneForward(&stage, shape, std::move(tokens));
  ASSERT_TRUE(stashed.ok()) << stashed.status();
  const absl::StatusOr<RankMemory> predicted = PredictOneForward(config);
  ASSERT_TRUE(predicted.ok()) << predicted.status();
  EXPECT_EQ(*stashed, predicted->stash_bytes_per_micro_batch);
  EXPECT_EQ(weights, predicted->weight_bytes);
  int64_t parameters = 0;
  for (Parameter* p : stage.parameters()) parameters += p->local_numel();
  EXPECT_EQ(parameters, predicted->parameters);
  ASSERT_TRUE(stage.Backward(0, 0, Tensor()).ok());
}

}  // namespace conveyor::testing_util
