// Which processes form a group, and how messages name it.
#ifndef CONVEYOR_PARALLEL_GROUP_H_
#define CONVEYOR_PARALLEL_GROUP_H_

#include <string>
#include <vector>

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

}  // namespace conveyor

#endif  // CONVEYOR_PARALLEL_GROUP_H_
