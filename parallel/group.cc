#include "parallel/group.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"

namespace conveyor {

std::string FormatRanks(const std::vector<int>& ranks) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (j - i >= 2) {
      parts.push_back(absl::StrCat(ranks[i], "-", ranks[j]));
    } else {
      for (size_t k = i; k <= j; ++k) parts.push_back(absl::StrCat(ranks[k]));
    }
    i = j + 1;
  }
  return absl::StrJoin(parts, ",");
}

std::string GroupName(absl::string_view kind, const std::vector<int>& global_ranks) {
  return absl::StrCat(kind, "[", FormatRanks(global_ranks), "]");
}

std::string DescribeGroup(const GroupSpec& group) {
  return absl::StrCat("group ", group.name, " (global ranks ", FormatRanks(group.global_ranks),
                      ")");
}

absl::Status CheckOperation(const GroupSpec& group, const absl::Status& broken, const char* op,
                            int64_t n) {
  RETURN_IF_ERROR(broken) << op << " on " << DescribeGroup(group)
                          << ": unusable after an earlier error";
  if (n < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s on %s: negative element count %d", op, DescribeGroup(group), n));
  }
  return absl::OkStatus();
}

}  // namespace conveyor
