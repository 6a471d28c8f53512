// Which processes form a group, and how messages name it.
#ifndef CONVEYOR_PARALLEL_GROUP_H_
#define CONVEYOR_PARALLEL_GROUP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace conveyor {

struct GroupSpec {
  std::string name;               // identical on every member, e.g. "tp[0,1]"
  std::vector<int> global_ranks;  // the members, in group-rank order
  int rank = 0;                   // this process's rank within the group
};

// "0,1,4,5"; runs of three or more consecutive ranks shorten to "0-15".
std::string FormatRanks(const std::vector<int>& ranks);

// kind + "[" + FormatRanks(global_ranks) + "]", e.g. "tp[0,1]", "world[0-15]".
std::string GroupName(absl::string_view kind, const std::vector<int>& global_ranks);

// "group tp[0,1] (global ranks 0,1)" for error messages.
std::string DescribeGroup(const GroupSpec& group);

// What every backend checks before an operation `op` on `n` elements: that no earlier
// error (`broken`) has made the communicator unusable, and that `n` is not negative.
absl::Status CheckOperation(const GroupSpec& group, const absl::Status& broken, const char* op,
                            int64_t n);

}  // namespace conveyor

#endif  // CONVEYOR_PARALLEL_GROUP_H_
