#include "base/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/exit_code.h"
#include "base/file_util.h"

namespace conveyor {

// close() is checked too, as NFS may report a failed write-back (disk full, quota)
// only there.
absl::Status WriteFile(const std::string& path, absl::string_view contents, Durability durability) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot create ", path));
  absl::Status status = WriteAll(fd, contents, path);
  if (status.ok() && durability == Durability::kDurable && ::fsync(fd) != 0) {
    status = WriteErrnoToStatus(errno, absl::StrCat("cannot fsync ", path));
  }
  if (::close(fd) != 0 && status.ok()) {
    status = WriteErrnoToStatus(errno, absl::StrCat("cannot close ", path));
  }
  return status;
}

std::string FolderOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return path.substr(0, slash == 0 ? 1 : slash);
}

absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents,
                                 const std::string& temp_path, Durability durability) {
  absl::Status status = WriteFile(temp_path, contents, durability);
  if (status.ok() && ::rename(temp_path.c_str(), path.c_str()) != 0) {
    status = absl::ErrnoToStatus(errno, absl::StrCat("cannot rename ", temp_path, " to ", path));
  }
  if (!status.ok()) {
    ::unlink(temp_path.c_str());  // best effort: the first failure is the one to report
    return status;
  }
  return durability == Durability::kDurable ? SyncDir(FolderOf(path)) : absl::OkStatus();
}

absl::Status SyncDir(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot open folder ", path));
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    return absl::ErrnoToStatus(err, absl::StrCat("cannot fsync folder ", path));
  }
  ::close(fd);
  return absl::OkStatus();
}

}  // namespace conveyor
