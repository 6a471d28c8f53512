// Megatron's learning-rate schedule (megatron/core/optimizer_param_scheduler.py,
// OptimizerParamScheduler.get_lr), for a group with peak `max` and floor `min`:
//   warmup:  lr(n) = init + (max - init) * n / warmup            for n <= warmup
//   constant: max
//   n > decay: min
//   inverse-square-root: max(min, max * sqrt(max(warmup, 1)) / sqrt(max(n, 1)))
//   otherwise, with r = (n - warmup) / (decay - warmup):
//     linear:   min + (max - min) * (1 - r)
//     cosine:   min + (max - min) * 0.5 * (1 + cos(pi * r))
//     WSD:      max until n <= decay - wsd, then with s = (n - (decay - wsd)) / wsd,
//               min + (max - min) * c(s), c by --lr-wsd-decay-style: exponential
//               2 * 0.5^s - 1, linear 1 - s, cosine 0.5 * (1 + cos(pi * s)),
//               minus_sqrt 1 - sqrt(s).
// n counts what the run has consumed: samples, as Megatron's scheduler does (it advances
// by each step's global batch). Under --train-iters the schedule's lengths are iterations
// times the global batch (Megatron's lr_decay_iters * global_batch_size), so with a
// constant batch lr depends on the steps taken alone; under --train-samples they are the
// --lr-*-samples flags. The first step (iteration 1) uses lr(0): Megatron's scheduler
// advances after each optimizer step.
//
// --decoupled-lr gives the input embedding and output layer a group of their own: the
// same schedule with max = --decoupled-lr and min = --decoupled-min-lr (else --min-lr),
// warmup still starting from --lr-warmup-init (Megatron's param_group max_lr / min_lr
// overrides).
#ifndef CONVEYOR_TRAINER_OPTIMIZATION_LR_SCHEDULE_H_
#define CONVEYOR_TRAINER_OPTIMIZATION_LR_SCHEDULE_H_

#include <cstdint>

#include "proto/config.pb.h"

namespace conveyor {

// The learning rates of one optimizer step: of every parameter, and of the embedding and
// output layer weights (equal to `main` without --decoupled-lr).
struct StepLearningRates {
  double main = 0.0;
  double decoupled = 0.0;
};

class LrSchedule {
 public:
  // `optimizer` is a ResolvedConfig's (trainer/config/resolved_config.h): lr_decay_iters and
  // lr_warmup_iters filled in, or lr_decay_samples and lr_warmup_samples;
  // `samples_per_step` is the global batch (the final one of a batch schedule).
  explicit LrSchedule(const OptimizerConfig& optimizer, int64_t samples_per_step = 1);

  // Learning rate after `steps_taken` optimizer steps of `samples_per_step`.
  double At(int64_t steps_taken) const { return AfterSamples(steps_taken * samples_per_step_); }

  // Learning rate of 1-based `iteration` at a constant global batch.
  double ForIteration(int64_t iteration) const { return At(iteration - 1); }

  // Learning rate of the step that follows `consumed_samples` (the batch may vary:
  // --rampup-batch-size, --step-batch-size-schedule).
  double AfterSamples(int64_t consumed_samples) const {
    return RatesAfterSamples(consumed_samples).main;
  }

  // Both groups' rates for the step that follows `consumed_samples`.
  StepLearningRates RatesAfterSamples(int64_t consumed_samples) const;
  // Both groups' rates of 1-based `iteration` at a constant global batch.
  StepLearningRates RatesForIteration(int64_t iteration) const {
    return RatesAfterSamples((iteration - 1) * samples_per_step_);
  }

 private:
  // Learning rate at `n` consumed samples of a group with peak `max` and floor `min`.
  double AtCount(int64_t n, double max, double min) const;
  // The WSD anneal's coefficient c(s), s in [0, 1].
  double WsdCoefficient(double s) const;

  OptimizerConfig config_;
  int64_t samples_per_step_;
  // The schedule's lengths in samples.
  int64_t warmup_ = 0, decay_ = 0, wsd_decay_ = 0;
};

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_OPTIMIZATION_LR_SCHEDULE_H_
