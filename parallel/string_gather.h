// Gathering text over a process group: at start-up, where ranks compare what they were
// told (their configuration) before any collective whose sizes depend on it, and at the
// end, where the first rank merges every rank's trace.
#ifndef CONVEYOR_PARALLEL_STRING_GATHER_H_
#define CONVEYOR_PARALLEL_STRING_GATHER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "parallel/communicator.h"

namespace conveyor {

// Every rank's `mine`, in group-rank order, on every rank. A collective: every rank of
// `group` calls it, with strings of any length (two AllGathers: the lengths, then the
// bytes padded to the longest).
absl::StatusOr<std::vector<std::string>> AllGatherStrings(Communicator& group,
                                                          absl::string_view mine);

// Every rank's `mine`, in group-rank order, on group rank `root` (an empty vector on the
// others). A collective: every rank of `group` calls it. The lengths travel in one
// AllGather, then each rank's bytes go straight to `root` (one send each), so gathering
// a large text (a rank's profile) costs its size once, and no rank needs a file system
// the others can see.
absl::StatusOr<std::vector<std::string>> GatherStringsToRoot(Communicator& group,
                                                             absl::string_view mine, int root);

}  // namespace conveyor

#endif  // CONVEYOR_PARALLEL_STRING_GATHER_H_
