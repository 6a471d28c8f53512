#include "parallel/tcp_store_wire.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <climits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace conveyor::tcp_store {

bool WaitReady(int fd, short events, absl::Time deadline) {
  while (true) {
    int wait_ms = -1;
    if (deadline != absl::InfiniteFuture()) {
      const absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) return false;
      wait_ms = static_cast<int>(std::min<int64_t>(
          INT_MAX, absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1)))));
    }
    pollfd p = {fd, events, 0};
    const int ready = ::poll(&p, 1, wait_ms);
    if (ready > 0) return true;
    if (ready < 0 && errno != EINTR) return true;  // let the I/O call report it
  }
}

bool WriteAll(int fd, const void* data, size_t n, absl::Time deadline) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    if (!WaitReady(fd, POLLOUT, deadline)) return false;
    // MSG_NOSIGNAL: a peer that went away is an error to report, not a SIGPIPE.
    // MSG_DONTWAIT: a blocking send would wait for room for all of `n`, past `deadline`.
    const ssize_t written = ::send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (written < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    if (written <= 0) return false;
    p += written;
    n -= static_cast<size_t>(written);
  }
  return true;
}

bool ReadAll(int fd, void* data, size_t n, absl::Time deadline) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    if (!WaitReady(fd, POLLIN, deadline)) return false;
    const ssize_t got = ::recv(fd, p, n, MSG_DONTWAIT);
    if (got < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    if (got <= 0) return false;
    p += got;
    n -= static_cast<size_t>(got);
  }
  return true;
}

bool WriteBlob(int fd, absl::string_view blob, absl::Time deadline) {
  const uint32_t length = static_cast<uint32_t>(blob.size());
  return blob.size() <= kMaxBlobBytes && WriteAll(fd, &length, sizeof(length), deadline) &&
         WriteAll(fd, blob.data(), blob.size(), deadline);
}

bool ReadBlob(int fd, std::string* blob, absl::Time deadline) {
  uint32_t length = 0;
  if (!ReadAll(fd, &length, sizeof(length), deadline) || length > kMaxBlobBytes) return false;
  blob->resize(length);
  return ReadAll(fd, blob->data(), length, deadline);
}

bool WriteMembership(int fd, const Membership& member, absl::Time deadline) {
  const uint32_t numbers[2] = {static_cast<uint32_t>(member.rank),
                               static_cast<uint32_t>(member.world_size)};
  return WriteAll(fd, numbers, sizeof(numbers), deadline) && WriteBlob(fd, member.job_id, deadline);
}

bool ReadMembership(int fd, Membership* member, absl::Time deadline) {
  uint32_t numbers[2] = {};
  if (!ReadAll(fd, numbers, sizeof(numbers), deadline) || numbers[0] > INT_MAX ||
      numbers[1] > INT_MAX) {
    return false;
  }
  member->rank = static_cast<int>(numbers[0]);
  member->world_size = static_cast<int>(numbers[1]);
  return ReadBlob(fd, &member->job_id, deadline);
}

std::string DescribeJob(const std::string& job_id) {
  return job_id.empty() ? std::string("none (its launcher names no job; see CONVEYOR_JOB_ID)")
                        : absl::StrCat("\"", job_id, "\"");
}

std::string EncodeVerdict(const absl::Status& refusal) {
  return absl::StrCat(static_cast<int>(refusal.code()), " ", refusal.message());
}

absl::Status DecodeVerdict(absl::string_view verdict) {
  const size_t space = verdict.find(' ');
  int code = 0;
  if (space == absl::string_view::npos || !absl::SimpleAtoi(verdict.substr(0, space), &code) ||
      code <= 0 || code > static_cast<int>(absl::StatusCode::kUnauthenticated)) {
    return absl::UnknownError(absl::StrCat("malformed verdict \"", verdict, "\""));
  }
  return absl::Status(static_cast<absl::StatusCode>(code), verdict.substr(space + 1));
}

}  // namespace conveyor::tcp_store
