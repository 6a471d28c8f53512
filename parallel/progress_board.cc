#include "parallel/progress_board.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace conveyor {
namespace {

// seq (8 bytes, little endian as the host writes it) + activity (NUL-padded).
constexpr int kSlotBytes = 64;
constexpr int kActivityBytes = kSlotBytes - 8;

}  // namespace

absl::StatusOr<std::unique_ptr<ProgressBoard>> FileProgressBoard::Open(const std::string& path,
                                                                       int rank, int size) {
  // Every rank opens with O_CREAT and no O_TRUNC: the first creates the file and
  // nobody erases what another has posted.
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::ErrnoToStatus(errno, absl::StrFormat("progress board %s: open", path));
  }
  return std::unique_ptr<ProgressBoard>(new FileProgressBoard(fd, rank, size));
}

FileProgressBoard::~FileProgressBoard() { ::close(fd_); }

void FileProgressBoard::Post(int64_t seq, absl::string_view activity) {
  char slot[kSlotBytes] = {};
  std::memcpy(slot, &seq, sizeof(seq));
  std::memcpy(slot + 8, activity.data(), std::min<size_t>(activity.size(), kActivityBytes - 1));
  (void)!::pwrite(fd_, slot, kSlotBytes, static_cast<off_t>(rank_) * kSlotBytes);
}

std::vector<ProgressBoard::Entry> FileProgressBoard::Read() const {
  std::vector<Entry> entries(size_);
  for (int r = 0; r < size_; ++r) {
    char slot[kSlotBytes] = {};
    if (::pread(fd_, slot, kSlotBytes, static_cast<off_t>(r) * kSlotBytes) != kSlotBytes) {
      continue;  // never posted (the file is shorter)
    }
    std::memcpy(&entries[r].seq, slot, sizeof(int64_t));
    slot[kSlotBytes - 1] = '\0';
    entries[r].activity = slot + 8;
    // A slot of zeros is a hole before a later rank's slot, not a post.
    if (entries[r].seq == 0 && entries[r].activity.empty()) entries[r].seq = -1;
  }
  return entries;
}

}  // namespace conveyor
