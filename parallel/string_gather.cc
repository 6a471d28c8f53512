#include "parallel/string_gather.h"

#include <algorithm>
#include <cstdint>

#include "absl/status/status.h"
#include "base/status_macros.h"

namespace conveyor {

namespace {

// Every rank's length of `mine`, in group-rank order, on every rank.
absl::StatusOr<std::vector<int64_t>> AllGatherLengths(Communicator& group,
                                                      absl::string_view mine) {
  const int64_t my_length = static_cast<int64_t>(mine.size());
  std::vector<int64_t> lengths(group.size());
  RETURN_IF_ERROR(
      group.AllGather(MakeBuffer(&my_length, 1), MakeBuffer(lengths.data(), group.size())));
  return lengths;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> AllGatherStrings(Communicator& group,
                                                          absl::string_view mine) {
  ASSIGN_OR_RETURN(const std::vector<int64_t> lengths, AllGatherLengths(group, mine));
  const int64_t longest = *std::max_element(lengths.begin(), lengths.end());
  std::string padded(mine);
  padded.resize(longest, '\0');
  std::string all(longest * group.size(), '\0');
  RETURN_IF_ERROR(group.AllGather(MakeBuffer(padded.data(), longest),
                                  MakeBuffer(all.data(), longest * group.size())));
  std::vector<std::string> strings(group.size());
  for (int r = 0; r < group.size(); ++r) strings[r] = all.substr(r * longest, lengths[r]);
  return strings;
}

absl::StatusOr<std::vector<std::string>> GatherStringsToRoot(Communicator& group,
                                                             absl::string_view mine, int root) {
  const int n = group.size();
  ASSIGN_OR_RETURN(const std::vector<int64_t> lengths, AllGatherLengths(group, mine));
  std::vector<std::string> strings;
  std::vector<Communicator::P2POp> ops;
  if (group.rank() == root) {
    strings.resize(n);
    strings[root] = std::string(mine);
    for (int r = 0; r < n; ++r) {
      if (r == root || lengths[r] == 0) continue;
      strings[r].resize(lengths[r]);
      ops.emplace_back(/*send=*/false, r, MakeBuffer(strings[r].data(), lengths[r]));
    }
  } else if (!mine.empty()) {
    // A send's buffer is only read (Communicator::BatchSendRecv).
    ops.emplace_back(/*send=*/true, root,
                     MakeBuffer(const_cast<char*>(mine.data()), lengths[group.rank()]));
  }
  if (!ops.empty()) RETURN_IF_ERROR(group.BatchSendRecv(ops));
  return strings;
}

}  // namespace conveyor
