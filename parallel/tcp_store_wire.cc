#include "parallel/tcp_store_wire.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace conveyor::tcp_store {

bool WriteAll(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    // MSG_NOSIGNAL: a peer that went away is an error to report, not a SIGPIPE.
    const ssize_t written = ::send(fd, p, n, MSG_NOSIGNAL);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return false;
    p += written;
    n -= static_cast<size_t>(written);
  }
  return true;
}

bool ReadAll(int fd, void* data, size_t n) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t got = ::recv(fd, p, n, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    p += got;
    n -= static_cast<size_t>(got);
  }
  return true;
}

bool WriteBlob(int fd, absl::string_view blob) {
  const uint32_t length = static_cast<uint32_t>(blob.size());
  return blob.size() <= kMaxBlobBytes && WriteAll(fd, &length, sizeof(length)) &&
         WriteAll(fd, blob.data(), blob.size());
}

bool ReadBlob(int fd, std::string* blob) {
  uint32_t length = 0;
  if (!ReadAll(fd, &length, sizeof(length)) || length > kMaxBlobBytes) return false;
  blob->resize(length);
  return ReadAll(fd, blob->data(), length);
}

}  // namespace conveyor::tcp_store
