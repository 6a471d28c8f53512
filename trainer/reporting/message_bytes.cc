#include "trainer/reporting/message_bytes.h"

#include "absl/strings/str_format.h"
#include "base/status_macros.h"

namespace conveyor {

std::array<int64_t, MessageBytes::kGroups> MessageBytes::Totals() const {
  // Gradients travel over data x context (the dp group itself without CP), the experts'
  // over the expert-data-parallel group; the loss sums over dp: all data-parallel
  // traffic. Groups that are another group's alias count once.
  const bool own_dp_cp = &context_.dp_cp() != &context_.dp();
  const bool own_expert_dp = &context_.expert_dp() != &context_.dp_cp();
  return {context_.tp().message_bytes(), context_.cp().message_bytes(),
          context_.ep().message_bytes(),
          context_.dp().message_bytes() + (own_dp_cp ? context_.dp_cp().message_bytes() : 0) +
              (own_expert_dp ? context_.expert_dp().message_bytes() : 0),
          context_.pp().message_bytes()};
}

absl::StatusOr<std::string> MessageBytes::Report(int64_t iterations) {
  static constexpr const char* kNames[kGroups] = {"tp", "cp", "ep", "dp", "pp"};
  const std::array<int64_t, kGroups> now = Totals();
  std::array<double, kGroups> per_iteration;
  for (int g = 0; g < kGroups; ++g) {
    per_iteration[g] = static_cast<double>(now[g] - last_[g]) / static_cast<double>(iterations);
  }
  last_ = now;
  RETURN_IF_ERROR(context_.world().AllReduceMax(per_iteration.data(), kGroups));
  std::string line = "    messages per iteration, max across ranks (MB):";
  for (int g = 0; g < kGroups; ++g) {
    absl::StrAppendFormat(&line, " %s %.3f%s", kNames[g], per_iteration[g] / 1e6,
                          g + 1 < kGroups ? " |" : "");
  }
  return line;
}

}  // namespace conveyor
