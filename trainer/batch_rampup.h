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
#ifndef CONVEYOR_TRAINER_BATCH_RAMPUP_H_
#define CONVEYOR_TRAINER_BATCH_RAMPUP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "proto/config.pb.h"

namespace conveyor {

// Consecutive steps at one global batch.
struct RampStage {
  int64_t batch = 0;           // the global batch of each step
  int64_t steps = 0;           // at least 1
  int64_t first_consumed = 0;  // samples consumed before the first of them
};

class BatchRampup {
 public:
  // `t`'s --rampup-batch-size (empty: the batch is `global_batch` throughout), which
  // RampupProblems has accepted, towards `global_batch`.
  BatchRampup(const TrainingConfig& t, int64_t global_batch);
  // Towards t's --global-batch-size (a resolved config's).
  explicit BatchRampup(const TrainingConfig& t) : BatchRampup(t, t.global_batch_size()) {}

  bool ramps() const { return ramps_; }
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

 private:
  // Steps at `batch` = GlobalBatchAt(consumed) before the batch grows or SAMPLES is
  // passed (the ramp's part of a stage).
  int64_t RampStageSteps(int64_t consumed, int64_t batch) const;

  int64_t final_ = 0, start_ = 0, increment_ = 0, samples_ = 0;
  double samples_per_increment_ = 0.0;
  bool ramps_ = false;
};

// What is wrong with --rampup-batch-size for `t` (a global batch of `global_batch` and
// `samples_per_micro_batch` = --micro-batch-size x DP; 0 when the layout does not tell
// them yet), one message per problem, each naming the flag and the fix; empty when it is
// fine or absent.
std::vector<std::string> RampupProblems(const TrainingConfig& t, int64_t global_batch,
                                        int64_t samples_per_micro_batch);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_BATCH_RAMPUP_H_
