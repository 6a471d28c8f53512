// Megatron's global-batch ramp, --rampup-batch-size START INCREMENT SAMPLES
// (megatron/core/num_microbatches_calculator.py, RampupBatchsizeNumMicroBatchesCalculator):
// with n = (GLOBAL - START) / INCREMENT increments spread over SAMPLES samples, the step
// that starts after `consumed` samples trains on
//   batch(consumed) = GLOBAL                                        if consumed > SAMPLES
//                   = START + INCREMENT * floor(consumed / (SAMPLES / n))   otherwise
// (the division in double precision, as Megatron's Python). A step's batch depends only
// on the samples consumed before it, so a resumed run continues the ramp where the
// checkpoint left it. The micro-batch count of a step is its batch / (micro batch x DP).
#ifndef CONVEYOR_TRAINER_BATCH_RAMPUP_H_
#define CONVEYOR_TRAINER_BATCH_RAMPUP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "proto/config.pb.h"

namespace conveyor {

class BatchRampup {
 public:
  // `t`'s --rampup-batch-size (empty: the batch is `global_batch` throughout), which
  // RampupProblems has accepted, towards `global_batch`.
  BatchRampup(const TrainingConfig& t, int64_t global_batch);
  // Towards t's --global-batch-size (a resolved config's).
  explicit BatchRampup(const TrainingConfig& t) : BatchRampup(t, t.global_batch_size()) {}

  bool ramps() const { return ramps_; }
  int64_t GlobalBatchAt(int64_t consumed_samples) const;

  // The global batch of each step that starts at or before SAMPLES consumed samples, in
  // order (the ramp's steps, Megatron's "rampup phase"; empty without a ramp).
  std::vector<int64_t> RampSteps() const;

  // Megatron's update_train_iters for --train-samples: the ramp's steps, then whole
  // final global batches of the samples left (floor division, as Python's //).
  int64_t TrainIters(int64_t train_samples) const;

 private:
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
