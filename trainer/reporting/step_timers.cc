#include "trainer/reporting/step_timers.h"

#include "absl/strings/str_format.h"
#include "base/status_macros.h"

namespace conveyor {

absl::StatusOr<std::string> StepTimers::Report(
    Communicator& world, int64_t iterations,
    std::vector<std::pair<std::string, double>>* max_seconds) {
  static constexpr const char* kNames[kNumPhases] = {"forward-backward", "grads-reduce",
                                                     "optimizer"};
  // One max-reduction gives both: max(x) and max(-x) = -min(x).
  std::array<double, 2 * kNumPhases> extremes;
  for (int p = 0; p < kNumPhases; ++p) {
    const double ms = 1e3 * seconds_[p] / static_cast<double>(iterations);
    extremes[p] = ms;
    extremes[kNumPhases + p] = -ms;
  }
  seconds_ = {};
  RETURN_IF_ERROR(world.AllReduceMax(extremes.data(), extremes.size()));
  std::string line = "    (min, max) time across ranks (ms):";
  for (int p = 0; p < kNumPhases; ++p) {
    absl::StrAppendFormat(&line, " %s (%.2f, %.2f)%s", kNames[p], -extremes[kNumPhases + p],
                          extremes[p], p + 1 < kNumPhases ? " |" : "");
    if (max_seconds != nullptr) max_seconds->emplace_back(kNames[p], extremes[p] / 1e3);
  }
  return line;
}

}  // namespace conveyor
