#include "trainer/optimization/lr_schedule.h"

#include <algorithm>
#include <cmath>

#include "proto/config_choices.h"

namespace conveyor {

LrSchedule::LrSchedule(const OptimizerConfig& optimizer, int64_t samples_per_step)
    : config_(optimizer), samples_per_step_(samples_per_step) {
  if (config_.lr_decay_samples() > 0) {
    warmup_ = config_.lr_warmup_samples();
    decay_ = config_.lr_decay_samples();
    wsd_decay_ = config_.lr_wsd_decay_samples();
  } else {
    warmup_ = int64_t{config_.lr_warmup_iters()} * samples_per_step_;
    decay_ = int64_t{config_.lr_decay_iters()} * samples_per_step_;
    wsd_decay_ = int64_t{config_.lr_wsd_decay_iters()} * samples_per_step_;
  }
}

StepLearningRates LrSchedule::RatesAfterSamples(int64_t consumed_samples) const {
  StepLearningRates rates;
  rates.main = AtCount(consumed_samples, config_.lr(), config_.min_lr());
  rates.decoupled =
      config_.has_decoupled_lr()
          ? AtCount(consumed_samples, config_.decoupled_lr(),
                    config_.has_decoupled_min_lr() ? config_.decoupled_min_lr() : config_.min_lr())
          : rates.main;
  return rates;
}

double LrSchedule::AtCount(int64_t n, double max, double min) const {
  if (warmup_ > 0 && n <= warmup_) {
    const double init = config_.lr_warmup_init();
    return init + (max - init) * static_cast<double>(n) / static_cast<double>(warmup_);
  }
  const LrDecayStyle style = ChoiceOr(config_.lr_decay_style(), LrDecayStyle::kLinear);
  if (style == LrDecayStyle::kConstant) return max;
  if (n > decay_) return min;
  if (style == LrDecayStyle::kInverseSquareRoot) {
    const double scale = std::sqrt(static_cast<double>(std::max<int64_t>(warmup_, 1))) /
                         std::sqrt(static_cast<double>(std::max<int64_t>(n, 1)));
    return std::max(min, max * scale);
  }
  double coeff = 1.0;
  if (style == LrDecayStyle::kWsd) {
    const int64_t anneal_start = decay_ - wsd_decay_;
    if (n > anneal_start) {
      coeff =
          WsdCoefficient(static_cast<double>(n - anneal_start) / static_cast<double>(wsd_decay_));
    }
  } else {
    const double ratio =
        decay_ > warmup_ ? static_cast<double>(n - warmup_) / static_cast<double>(decay_ - warmup_)
                         : 1.0;
    coeff = style == LrDecayStyle::kCosine ? 0.5 * (std::cos(M_PI * ratio) + 1.0) : 1.0 - ratio;
  }
  return min + coeff * (max - min);
}

double LrSchedule::WsdCoefficient(double s) const {
  switch (ChoiceOr(config_.lr_wsd_decay_style(), LrWsdDecayStyle::kExponential)) {
    case LrWsdDecayStyle::kExponential:
      return 2.0 * std::pow(0.5, s) - 1.0;
    case LrWsdDecayStyle::kLinear:
      return 1.0 - s;
    case LrWsdDecayStyle::kCosine:
      return 0.5 * (std::cos(M_PI * s) + 1.0);
    case LrWsdDecayStyle::kMinusSqrt:
      return 1.0 - std::sqrt(s);
  }
  return 1.0;
}

}  // namespace conveyor
