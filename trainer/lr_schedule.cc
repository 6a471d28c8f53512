#include "trainer/lr_schedule.h"

#include <algorithm>
#include <cmath>

#include "proto/config_choices.h"

namespace conveyor {

LrSchedule::LrSchedule(const OptimizerConfig& optimizer, int64_t samples_per_step)
    : config_(optimizer), samples_per_step_(samples_per_step) {}

double LrSchedule::At(int64_t steps_taken) const {
  const bool by_samples = config_.lr_decay_samples() > 0;
  return AtCount(by_samples ? steps_taken * samples_per_step_ : steps_taken);
}

double LrSchedule::AfterSamples(int64_t consumed_samples) const {
  return AtCount(consumed_samples);
}

double LrSchedule::AtCount(int64_t n) const {
  const double peak = config_.lr();
  const double min = config_.min_lr();
  const bool by_samples = config_.lr_decay_samples() > 0;
  const int64_t warmup = by_samples ? config_.lr_warmup_samples() : config_.lr_warmup_iters();
  const int64_t decay = by_samples ? config_.lr_decay_samples() : config_.lr_decay_iters();
  if (warmup > 0 && n <= warmup) {
    return config_.lr_warmup_init() +
           (peak - config_.lr_warmup_init()) * static_cast<double>(n) / warmup;
  }
  const LrDecayStyle style = ChoiceOr(config_.lr_decay_style(), LrDecayStyle::kLinear);
  if (style == LrDecayStyle::kConstant) return peak;
  if (style == LrDecayStyle::kInverseSquareRoot) {
    const double scale = std::sqrt(static_cast<double>(std::max<int64_t>(warmup, 1))) /
                         std::sqrt(static_cast<double>(std::max<int64_t>(n, 1)));
    return std::max(min, peak * scale);
  }
  if (n > decay) return min;
  const double ratio =
      decay > warmup ? static_cast<double>(n - warmup) / static_cast<double>(decay - warmup) : 1.0;
  const double coeff =
      style == LrDecayStyle::kCosine ? 0.5 * (std::cos(M_PI * ratio) + 1.0) : 1.0 - ratio;
  return min + coeff * (peak - min);
}

}  // namespace conveyor
