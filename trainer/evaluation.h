// Validation loss (--eval-interval, --eval-iters): forward passes without dropout over
// the validation split, through the same pipeline stages, averaged over micro-batches
// and data-parallel ranks as the training loss is.
#ifndef CONVEYOR_TRAINER_EVALUATION_H_
#define CONVEYOR_TRAINER_EVALUATION_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "data/sample_source.h"
#include "model/gpt_stage.h"
#include "proto/config.pb.h"
#include "trainer/training_loop.h"

namespace conveyor {

// Mean loss over --eval-iters global batches of `valid`, starting at its sample
// `first_sample`; the same on every rank (all must call).
absl::StatusOr<double> Evaluate(const Config& config, GptStage* stage, const SampleSource& valid,
                                int64_t first_sample, const RankPlace& place);

// Megatron's report: " validation loss at iteration 100 | lm loss value: ... | lm loss
// PPL: ... |" between dashed lines.
std::string FormatValidationLine(int64_t iteration, double loss);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_EVALUATION_H_
