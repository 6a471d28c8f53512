// The training loop of one rank: micro-batches with gradient accumulation, gradient
// synchronisation, NaN/inf detection, clipping, the optimizer step, the learning-rate
// schedule, and the interval log (Megatron's line on `log`, JSON lines on `metrics`).
#ifndef CONVEYOR_TRAINER_TRAINING_LOOP_H_
#define CONVEYOR_TRAINER_TRAINING_LOOP_H_

#include <cstdint>
#include <optional>
#include <ostream>
#include <vector>

#include "absl/status/statusor.h"
#include "data/sample_source.h"
#include "model/gpt_stage.h"
#include "proto/config.pb.h"
#include "runtime/cpu/cpu_optimizer_ops.h"
#include "trainer/rank_context.h"
#include "trainer/resolved_config.h"
#include "trainer/tensorboard/megatron_scalars.h"

namespace conveyor {

struct TrainingResult {
  std::vector<double> losses;        // per iteration: mean over micro-batches and DP ranks
  std::vector<double> grad_norms;    // per iteration, before clipping
  std::vector<double> valid_losses;  // per evaluation (--eval-interval)
  // After a run that reached --train-iters (EvaluateAfterTraining).
  std::optional<double> final_valid_loss;
  std::optional<double> test_loss;
  int64_t skipped_iterations = 0;
  int64_t nan_iterations = 0;
  int64_t consumed_samples = 0;
  bool exited_early = false;  // an exit condition stopped the run before --train-iters
  // This process's model-state bytes after the first step, as the allocator counts them
  // (what the memory model predicts exactly).
  struct ModelStateBytes {
    int64_t weights = 0, grads = 0, optimizer = 0;
  } model_state;
};

// The held-out splits a run evaluates on; either may be null.
struct EvaluationSplits {
  const SampleSource* valid = nullptr;  // every --eval-interval, and after training
  const SampleSource* test = nullptr;   // after training
};

struct TrainingOutputs {
  std::ostream* log = nullptr;      // log lines and the memory report; may be null
  std::ostream* metrics = nullptr;  // JSON lines; may be null
  tensorboard::MegatronScalars* tensorboard = nullptr;  // --tensorboard-dir; may be null
};

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
