#include "parallel/string_gather.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace conveyor {

absl::StatusOr<std::vector<std::string>> AllGatherStrings(Communicator& group,
                                                          absl::string_view mine) {
  // A float holds every integer below 2^24 exactly: lengths and bytes travel as such.
  constexpr size_t kMaxLength = size_t{1} << 24;
  if (mine.size() >= kMaxLength) {
    return absl::InvalidArgumentError(absl::StrCat("gathering a string of ", mine.size(),
                                                   " bytes over ", group.name(),
                                                   ": at most 2^24 - 1 bytes travel"));
  }
  const int n = group.size();
  const float my_length = static_cast<float>(mine.size());
  std::vector<float> lengths(n);
  RETURN_IF_ERROR(group.AllGather(&my_length, 1, lengths.data()));
  const int64_t longest = static_cast<int64_t>(*std::max_element(lengths.begin(), lengths.end()));
  std::vector<float> padded(longest, 0.0f);
  for (size_t i = 0; i < mine.size(); ++i) padded[i] = static_cast<unsigned char>(mine[i]);
  std::vector<float> all(longest * n);
  RETURN_IF_ERROR(group.AllGather(padded.data(), longest, all.data()));
  std::vector<std::string> strings(n);
  for (int r = 0; r < n; ++r) {
    const float* bytes = all.data() + r * longest;
    for (int64_t i = 0; i < static_cast<int64_t>(lengths[r]); ++i) {
      strings[r].push_back(static_cast<char>(static_cast<unsigned char>(bytes[i])));
    }
  }
  return strings;
}

absl::StatusOr<std::vector<std::string>> GatherStringsToRoot(Communicator& group,
                                                             absl::string_view mine, int root) {
  const int n = group.size();
  const int64_t my_length = static_cast<int64_t>(mine.size());
  std::vector<int64_t> lengths(n);
  RETURN_IF_ERROR(group.AllGather(MakeBuffer(&my_length, 1), MakeBuffer(lengths.data(), n)));
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
                     MakeBuffer(const_cast<char*>(mine.data()), my_length));
  }
  if (!ops.empty()) RETURN_IF_ERROR(group.BatchSendRecv(ops));
  return strings;
}

}  // namespace conveyor
