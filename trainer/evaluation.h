// Validation loss (--eval-interval, --eval-iters): forward passes without dropout over
// the validation split, through the same pipeline stages, averaged over micro-batches
// and data-parallel ranks as the training loss is.
#ifndef CONVEYOR_TRAINER_EVALUATION_H_
#define CONVEYOR_TRAINER_EVALUATION_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "data/sample_source.h"
#include "model/gpt_stage.h"
#include "trainer/config/resolved_config.h"
#include "trainer/rank_context.h"
#include "trainer/reporting/training_outputs.h"
#include "trainer/training_result.h"

namespace conveyor {

// Mean loss over --eval-iters global batches of `split`, starting at its sample
// `first_sample`; the same on every rank (all must call).
absl::StatusOr<double> Evaluate(const ResolvedConfig& config, const RankContext& context,
                                GptStage* stage, const SampleSource& split, int64_t first_sample);

// The first sample of a split's evaluation number `evaluation` (0, 1, ...): Megatron's
// validation reader moves on, so each evaluation sees new samples.
int64_t EvaluationFirstSample(const ResolvedConfig& config, int64_t evaluation);

// At an --eval-interval iteration, with a validation split and --eval-iters > 0: the
// validation loss, logged and recorded in `result`. Every rank must call.
absl::Status EvaluateDuringTraining(const ResolvedConfig& config, const RankContext& context,
                                    GptStage* stage, const SampleSource* valid, int64_t iteration,
                                    const TrainingOutputs& out, TrainingResult* result);

// Megatron's report: " validation loss at iteration 100 | lm loss value: ... | lm loss
// PPL: ... |" between dashed lines; `at` is "iteration 100" (during training) or
// "iteration 100 on validation set" / "... on test set" (after it).
std::string FormatValidationLine(absl::string_view at, double loss);

// Megatron's end of a run that reached --train-iters: the validation loss over the
// validation split's next --eval-iters batches (after those the in-loop evaluations
// took) and the test loss over the test split's first ones, each logged and recorded
// in `result`. A null split, or --eval-iters 0, is skipped. Every rank must call.
absl::Status EvaluateAfterTraining(const ResolvedConfig& config, const RankContext& context,
                                   GptStage* stage, int64_t iteration,
                                   const EvaluationSplits& held_out, const TrainingOutputs& out,
                                   TrainingResult* result);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_EVALUATION_H_
