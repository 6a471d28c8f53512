// One rank's memory for one micro-batch's forward, measured by the allocator and
// predicted by the memory model: shared by the dense, MoE and multi-token prediction
// memory tests.
#ifndef CONVEYOR_TESTS_MODEL_ONE_FORWARD_MEMORY_H_
#define CONVEYOR_TESTS_MODEL_ONE_FORWARD_MEMORY_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "model/gpt_stage.h"
#include "model/memory_model.h"
#include "model/model_shape.h"
#include "runtime/ops.h"
#include "trainer/config/resolved_config.h"

namespace conveyor::testing_util {

// The CPU backend: fp32, or bf16 emulated.
const Ops* CpuOpsFor(bool bf16);

// The memory model's prediction for one rank that runs one forward (`config` resolved
// for one rank).
absl::StatusOr<RankMemory> PredictOneForward(const ResolvedConfig& config);

// The activation bytes one forward of a micro-batch of one sample (`tokens`, seq of them;
// labels 5) leaves stashed in `stage`, whose step it begins.
absl::StatusOr<int64_t> StashOfOneForward(GptStage* stage, const ModelShape& shape,
                                          std::vector<int32_t> tokens);

// Builds one stage of `layers` layers of `config`'s model (one rank, seed 1) and checks,
// by gtest expectations, that the allocator's weight bytes, one forward's stash and the
// parameter count equal the memory model's prediction; then runs the backward.
void ExpectOneStageMatchesPrediction(const ResolvedConfig& config, int layers, bool bf16);

}  // namespace conveyor::testing_util

#endif  // CONVEYOR_TESTS_MODEL_ONE_FORWARD_MEMORY_H_
