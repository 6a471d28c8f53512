// The training loop of one rank: micro-batches with gradient accumulation, gradient
// synchronisation, NaN/inf detection, clipping, the optimizer step, the learning-rate
// schedule, and the interval log (Megatron's line on `log`, JSON lines on `metrics`).
#ifndef CONVEYOR_TRAINER_TRAINING_LOOP_H_
#define CONVEYOR_TRAINER_TRAINING_LOOP_H_

#include "absl/status/statusor.h"
#include "data/sample_source.h"
#include "model/gpt_stage.h"
#include "proto/config.pb.h"
#include "runtime/cpu/cpu_optimizer_ops.h"
#include "trainer/config/resolved_config.h"
#include "trainer/rank_context.h"
#include "trainer/reporting/training_outputs.h"
#include "trainer/training_result.h"

namespace conveyor {

// `context` is this rank's place, which `stage` was built for, and `optimizer_ops` the
// optimizer's arithmetic on the device of the stage's parameters. Runs `stage` on `data`
// up to --train-iters, from the --load checkpoint if any (else from iteration 0, sample
// 0), saving under --save as the checkpoint flags say; each step runs this rank's
// actions of --pipeline-schedule;
// data-parallel rank d takes samples [d * micro, (d + 1) * micro) of each group of
// DP * micro samples, as Megatron's sampler does. Fails (with the iteration named) on
// a NaN or inf loss or gradient norm when --nan-policy is stop, and when the data
// source or a collective fails. With a validation split, every --eval-interval
// iterations the validation loss over --eval-iters batches is logged; a run that
// reaches --train-iters ends with EvaluateAfterTraining over both held-out splits. A
// run that resumes at --train-iters or later (a relaunch of a finished run) trains
// nothing: it says so on `log` and returns no losses, saving and evaluating nothing.
absl::StatusOr<TrainingResult> Train(const ResolvedConfig& config, const RankContext& context,
                                     GptStage* stage, const SampleSource& data,
                                     const TrainingOutputs& out,
                                     const EvaluationSplits& held_out = {},
                                     const OptimizerOps& optimizer_ops = CpuOptimizerOps::Get());

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_TRAINING_LOOP_H_
