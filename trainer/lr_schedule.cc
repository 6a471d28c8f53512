#include "trainer/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace conveyor {

LrSchedule::LrSchedule(const OptimizerConfig& optimizer) : config_(optimizer) {}

double LrSchedule::At(int64_t n) const {
  const double peak = config_.lr();
  const double min = config_.min_lr();
  const int64_t warmup = config_.lr_warmup_iters();
  const int64_t decay = config_.lr_decay_iters();
  if (warmup > 0 && n <= warmup) {
    return config_.lr_warmup_init() +
           (peak - config_.lr_warmup_init()) * static_cast<double>(n) / warmup;
  }
  const std::string& style = config_.lr_decay_style();
  if (style == "constant") return peak;
  if (style == "inverse-square-root") {
    const double scale = std::sqrt(static_cast<double>(std::max<int64_t>(warmup, 1))) /
                         std::sqrt(static_cast<double>(std::max<int64_t>(n, 1)));
    return std::max(min, peak * scale);
  }
  if (n > decay) return min;
  const double ratio =
      decay > warmup ? static_cast<double>(n - warmup) / static_cast<double>(decay - warmup) : 1.0;
  const double coeff = style == "cosine" ? 0.5 * (std::cos(M_PI * ratio) + 1.0) : 1.0 - ratio;
  return min + coeff * (peak - min);
}

}  // namespace conveyor
