// Megatron's global-batch ramp, --rampup-batch-size START INCREMENT SAMPLES
// (megatron/core/num_microbatches_calculator.py, RampupBatchsizeNumMicroBatchesCalculator):
// with n = (GLOBAL - START) / INCREMENT increments spread over SAMPLES samples, the step
// that starts after `consumed` samples trains on
//   batch(consumed) = GLOBAL                                        if consumed > SAMPLES
//                   = START + INCREMENT * floor(consumed / (SAMPLES / n))   otherwise
// (the division in double precision, as Megatron's Python). A step's batch depends only
// on the samples consumed before it, so a resumed run continues the ramp where the
// checkpoint left it. The micro-batch count of a step is its batch / (micro batch x DP).
// --train-samples bounds the samples a run consumes, ramp or not: Megatron's
// update_train_iters counts every ramp step even past --train-samples (and then
// subtracts), which trains on more samples than asked; here the run ends at the last
// whole global batch that fits.
//
// Megatron's --step-batch-size-schedule "THRESHOLD:BATCH ..." (the same file,
// StepBatchsizeNumMicroBatchesCalculator, which Megatron's GPT-3 recipe uses in place of
// the ramp): each number may end in K, M, B or T (10^3 ... 10^12, int(float(x) * 10^k)),
// thresholds are tokens turned into samples by // --seq-length, sorted, the first 0 and
// strictly increasing; the step after `consumed` samples trains on the batch of the last
// threshold <= consumed. The final entry's batch is the global batch. It counts under
// --train-iters as well as --train-samples (with the rule above on the last batch).
#ifndef CONVEYOR_TRAINER_CONFIG_BATCH_RAMPUP_H_
#define CONVEYOR_TRAINER_CONFIG_BATCH_RAMPUP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/config.pb.h"

namespace conveyor {

// Consecutive steps at one global batch.
struct RampStage {
  int64_t batch = 0;           // the global batch of each step
  int64_t steps = 0;           // at least 1
  int64_t first_consumed = 0;  // samples consumed before the first of them
};

// From `first_sample` consumed samples on, steps train on `batch` samples.
struct BatchStep {
  int64_t first_sample = 0;
  int64_t batch = 0;
};

// Megatron's parse of --step-batch-size-schedule `text` with thresholds in tokens of
// `seq_length` each, sorted by threshold; InvalidArgument naming the entry otherwise.
absl::StatusOr<std::vector<BatchStep>> ParseStepBatchSizeSchedule(const std::string& text,
                                                                  int64_t seq_length);

class BatchRampup {
 public:
  // `t`'s --step-batch-size-schedule of samples of `seq_length` tokens, or its
  // --rampup-batch-size towards `global_batch` (neither: the batch is `global_batch`
  // throughout), which validation has accepted.
  BatchRampup(const TrainingConfig& t, int64_t global_batch, int64_t seq_length);
  // A resolved config's: towards its --global-batch-size.
  explicit BatchRampup(const Config& c)
      : BatchRampup(c.training(), c.training().global_batch_size(), c.model().seq_length()) {}

  bool ramps() const { return ramps_; }
  int64_t final_batch() const { return final_; }
  int64_t GlobalBatchAt(int64_t consumed_samples) const;

  // The steps of a run of `train_samples` samples as stages of equal global batch, in
  // order: the ramp's, then the final batch's. A run ends when the next step's batch no
  // longer fits in what is left of `train_samples` (Megatron drops the partial last
  // batch), even within the ramp. Found by bisection per stage, never step by step: a
  // ramp of billions of samples has at most (GLOBAL - START) / INCREMENT + 1 stages.
  std::vector<RampStage> Stages(int64_t train_samples) const;

  // The steps of a run of `train_samples` samples (--train-iters under --train-samples):
  // the sum of Stages' steps.
  int64_t TrainIters(int64_t train_samples) const;

  // The stages of `t`'s run: of --train-samples, or else of --train-iters steps.
  std::vector<RampStage> RunStages(const TrainingConfig& t) const;

 private:
  // --step-batch-size-schedule's stages, up to `train_samples` (0: no limit) and
  // `max_steps` steps.
  std::vector<RampStage> ScheduleStages(int64_t train_samples, int64_t max_steps) const;

  // Steps at `batch` = GlobalBatchAt(consumed) before the batch grows or SAMPLES is
  // passed (the ramp's part of a stage).
  int64_t RampStageSteps(int64_t consumed, int64_t batch) const;

  int64_t final_ = 0, start_ = 0, increment_ = 0, samples_ = 0;
  double samples_per_increment_ = 0.0;
  bool ramps_ = false;
  std::vector<BatchStep> schedule_;  // --step-batch-size-schedule
};

// What is wrong with --rampup-batch-size for `t` (a global batch of `global_batch` and
// `samples_per_micro_batch` = --micro-batch-size x DP; 0 when the layout does not tell
// them yet), one message per problem, each naming the flag and the fix; empty when it is
// fine or absent.
std::vector<std::string> RampupProblems(const TrainingConfig& t, int64_t global_batch,
                                        int64_t samples_per_micro_batch);

// What is wrong with `c`'s --step-batch-size-schedule: its form, its thresholds, the
// flags it excludes (--rampup-batch-size, --num-micro-batches, a --global-batch-size other
// than its last batch) and, with `samples_per_micro_batch` > 0, the batches the run
// reaches that do not split into micro-batches; empty when fine or absent.
std::vector<std::string> StepBatchScheduleProblems(const Config& c,
                                                   int64_t samples_per_micro_batch);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_CONFIG_BATCH_RAMPUP_H_
