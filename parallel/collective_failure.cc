#include "parallel/collective_failure.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace conveyor {
namespace {

std::string LastSeen(const ProgressBoard::Entry& entry) {
  if (entry.unknown) {
    return "progress unknown: the rendezvous store did not answer, so the link to global rank "
           "0's host may be down";
  }
  if (entry.seq < 0) return "never posted progress";
  if (entry.seq == 0) return absl::StrCat("last seen in ", entry.activity);
  return absl::StrFormat("last entered %s, after collective #%d", entry.activity, entry.seq);
}

std::string DescribeRank(const GroupSpec& group, const std::vector<ProgressBoard::Entry>& entries,
                         int r) {
  return absl::StrFormat("group rank %d (global rank %d, %s)", r, group.global_ranks[r],
                         LastSeen(entries[r]));
}

// What to say when the progress board shows every rank inside the collective: they all
// came, so the data between them stopped moving (a link went down after the posts).
std::string TransferStalled(const CollectiveFailure& failure, const GroupSpec& group,
                            absl::string_view backend) {
  constexpr char kFix[] =
      "check the network between this rank's host and theirs (a link or switch that went "
      "down, a firewall, an interface the peers cannot reach)";
  if (failure.stalled.empty()) {
    return absl::StrFormat(
        ": every rank had arrived, so the transfer between the ranks stalled, not a rank (%s "
        "names no peer); %s",
        backend, kFix);
  }
  std::vector<std::string> peers;
  for (int r : failure.stalled) {
    peers.push_back(absl::StrFormat("group rank %d (global rank %d)", r, group.global_ranks[r]));
  }
  return absl::StrFormat(
      ": every rank had arrived, so the transfer stalled, not a rank: transfers with %s did not "
      "complete; %s",
      absl::StrJoin(peers, ", "), kFix);
}

}  // namespace

std::vector<int> RanksNotArrived(const std::vector<ProgressBoard::Entry>& entries, int64_t seq,
                                 int self) {
  std::vector<int> missing;
  for (int r = 0; r < static_cast<int>(entries.size()); ++r) {
    if (r != self && entries[r].seq < seq) missing.push_back(r);
  }
  return missing;
}

absl::Status CollectiveFailureStatus(const CollectiveFailure& failure, const GroupSpec& group,
                                     const std::vector<ProgressBoard::Entry>& entries,
                                     absl::string_view backend) {
  std::string message =
      absl::StrFormat("%s #%d on %s %s after %s (timeout %s)", failure.op, failure.seq,
                      DescribeGroup(group), failure.timed_out ? "timed out" : "failed",
                      absl::FormatDuration(absl::Trunc(failure.waited, absl::Milliseconds(1))),
                      absl::FormatDuration(failure.timeout));
  if (failure.collective) {
    const std::vector<int> missing = RanksNotArrived(entries, failure.seq, group.rank);
    std::vector<std::string> described;
    for (int r : missing) described.push_back(DescribeRank(group, entries, r));
    // A rank that entered a different collective at the same position is a mismatch
    // in program order, not a slow rank: say so.
    for (int r = 0; r < static_cast<int>(entries.size()); ++r) {
      if (r != group.rank && entries[r].seq == failure.seq && entries[r].activity != failure.op) {
        described.push_back(
            absl::StrFormat("group rank %d (global rank %d) entered %s as collective #%d instead",
                            r, group.global_ranks[r], entries[r].activity, failure.seq));
      }
    }
    absl::StrAppend(&message, described.empty() ? TransferStalled(failure, group, backend)
                                                : ": ranks that did not arrive: " +
                                                      absl::StrJoin(described, "; "));
  } else {
    std::vector<std::string> described;
    for (int r : failure.peers) described.push_back(DescribeRank(group, entries, r));
    absl::StrAppend(&message, ": waiting on ", absl::StrJoin(described, "; "));
  }
  if (!failure.transport_error.empty()) {
    absl::StrAppend(&message, "; ", backend, ": ", failure.transport_error);
  }
  return failure.timed_out ? absl::DeadlineExceededError(message) : absl::UnavailableError(message);
}

}  // namespace conveyor
