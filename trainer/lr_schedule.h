// Megatron's learning-rate schedule (OptimizerParamScheduler), in optimizer steps:
//   warmup:  lr(n) = init + (peak - init) * n / warmup          for n <= warmup
//   then, with r = (n - warmup) / (decay - warmup) and lr(n) = min_lr for n > decay:
//     constant: peak
//     linear:   min + (peak - min) * (1 - r)
//     cosine:   min + (peak - min) * 0.5 * (1 + cos(pi * r))
//     inverse-square-root: max(min, peak * sqrt(max(warmup, 1)) / sqrt(max(n, 1)))
// n counts the steps already taken, so the first step (iteration 1) uses lr(0), as in
// Megatron, where the scheduler advances after each optimizer step. Under --train-samples
// (lr_decay_samples set) n, warmup and decay count samples instead: a step advances n by
// the global batch.
#ifndef CONVEYOR_TRAINER_LR_SCHEDULE_H_
#define CONVEYOR_TRAINER_LR_SCHEDULE_H_

#include <cstdint>

#include "proto/config.pb.h"

namespace conveyor {

class LrSchedule {
 public:
  // `optimizer` is a ResolvedConfig's (trainer/resolved_config.h): lr_decay_iters and
  // lr_warmup_iters filled in, or lr_decay_samples and lr_warmup_samples;
  // `samples_per_step` is the global batch.
  explicit LrSchedule(const OptimizerConfig& optimizer, int64_t samples_per_step = 1);

  // Learning rate after `steps_taken` optimizer steps.
  double At(int64_t steps_taken) const;

  // Learning rate of 1-based `iteration`.
  double ForIteration(int64_t iteration) const { return At(iteration - 1); }

  // Learning rate of the step that follows `consumed_samples` (Megatron's scheduler
  // advances by each step's global batch, which --rampup-batch-size varies); the
  // schedule must count samples.
  double AfterSamples(int64_t consumed_samples) const;

 private:
  // Learning rate at `n` steps or samples (the schedule's unit).
  double AtCount(int64_t n) const;

  OptimizerConfig config_;
  int64_t samples_per_step_;
};

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_LR_SCHEDULE_H_
