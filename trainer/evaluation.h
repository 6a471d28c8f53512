// Validation loss (--eval-interval, --eval-iters): forward passes without dropout over
// the validation split, through the same pipeline stages, averaged over micro-batches
// and data-parallel ranks as the training loss is.
#ifndef CONVEYOR_TRAINER_EVALUATION_H_
#define CONVEYOR_TRAINER_EVALUATION_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
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
// PPL: ... |" between dashed lines; `at` is "iteration 100" (during training) or
// "iteration 100 on validation set" / "... on test set" (after it).
std::string FormatValidationLine(absl::string_view at, double loss);

// Megatron's end of a run that reached --train-iters: the validation loss over the
// validation split's next --eval-iters batches (after those the in-loop evaluations
// took) and the test loss over the test split's first ones, each logged and recorded
// in `result`. A null split, or --eval-iters 0, is skipped. Every rank must call.
absl::Status EvaluateAfterTraining(const Config& config, GptStage* stage, int64_t iteration,
                                   const EvaluationSplits& held_out, const RankPlace& place,
                                   const TrainingOutputs& out, TrainingResult* result);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_EVALUATION_H_
