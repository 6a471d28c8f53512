// Turns a failed or timed-out operation into a Status that says what an operator
// needs: the operation, the group, how long it waited, and which ranks had not
// arrived, read from the group's ProgressBoard. When every rank had arrived, the
// transfer stalled, not a rank (a link went down after the peers had posted their
// progress): the message says so and names the peers whose transfers did not
// complete, where the backend knows them. Shared by the gloo and NCCL backends.
#ifndef CONVEYOR_PARALLEL_COLLECTIVE_FAILURE_H_
#define CONVEYOR_PARALLEL_COLLECTIVE_FAILURE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "parallel/group.h"
#include "parallel/progress_board.h"

namespace conveyor {

struct CollectiveFailure {
  const char* op;          // "AllReduceSum"
  int64_t seq;             // the collective's number in this group, from 1
  bool collective;         // false for point-to-point (only `peers` take part)
  std::vector<int> peers;  // group ranks waited on, for point-to-point
  bool timed_out;          // the transport gave up at the deadline
  absl::Duration waited;
  absl::Duration timeout;
  std::string transport_error;  // the backend's own message, kept for experts
  // Group ranks whose transfers with this rank had not completed when it gave up, in
  // increasing order; empty where the backend cannot tell (NCCL).
  std::vector<int> stalled;
};

// Group ranks that had not entered collective `seq` according to `entries`.
std::vector<int> RanksNotArrived(const std::vector<ProgressBoard::Entry>& entries, int64_t seq,
                                 int self);

// DeadlineExceeded when timed out, else Unavailable; e.g. "AllReduceSum #3 on group
// world[0-2] (global ranks 0,1,2) timed out after 2s (timeout 2s): ranks that did not
// arrive: group rank 2 (global rank 2, last entered Barrier #2); gloo: ...", or, when
// every rank had arrived, "...: every rank had arrived, so the transfer stalled, not a
// rank: transfers with group rank 1 (global rank 2) did not complete; check ...".
absl::Status CollectiveFailureStatus(const CollectiveFailure& failure, const GroupSpec& group,
                                     const std::vector<ProgressBoard::Entry>& entries,
                                     absl::string_view backend);

}  // namespace conveyor

#endif  // CONVEYOR_PARALLEL_COLLECTIVE_FAILURE_H_
