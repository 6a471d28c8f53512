#include "base/file_util.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>

#include "absl/strings/str_cat.h"
#include "base/exit_code.h"

namespace conveyor {

// write(2) moves at most about 2 GiB per call on Linux.
constexpr size_t kMaxWrite = size_t{1} << 30;

absl::Status WriteAll(int fd, absl::string_view contents, const std::string& path) {
  for (size_t done = 0; done < contents.size();) {
    const ssize_t n =
        ::write(fd, contents.data() + done, std::min(contents.size() - done, kMaxWrite));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return WriteErrnoToStatus(n < 0 ? errno : EIO, absl::StrCat("cannot write ", path));
    }
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

bool PathExists(const std::string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0;
}

}  // namespace conveyor
