#include "trainer/checkpoint/file_io.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "base/atomic_file.h"
#include "base/exit_code.h"
#include "base/file_util.h"
#include "base/status_macros.h"

namespace conveyor {
namespace {

// read(2) moves at most about 2 GiB per call on Linux.
constexpr int64_t kMaxIo = int64_t{1} << 30;

// OK when `path` names the open file `fd` (same device and inode); NotFound when the
// name is gone, FailedPrecondition when it names another file.
absl::Status CheckNamesOpenFile(const std::string& path, int fd) {
  struct stat held, named;
  if (fstat(fd, &held) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot stat the lock file ", path));
  }
  if (stat(path.c_str(), &named) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("the lock file ", path, " is gone"));
  }
  if (held.st_dev != named.st_dev || held.st_ino != named.st_ino) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " is no longer the file this process locked"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<WritableFile> WritableFile::Create(const std::string& path) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot create ", path));
  return WritableFile(path, fd);
}

WritableFile::WritableFile(WritableFile&& other) noexcept
    : path_(std::move(other.path_)), fd_(other.fd_), size_(other.size_) {
  other.fd_ = -1;
}

WritableFile::~WritableFile() {
  if (fd_ >= 0) close(fd_);
}

absl::Status WritableFile::Append(const void* data, int64_t n) {
  if (fd_ < 0) return absl::FailedPreconditionError(absl::StrCat(path_, " is closed"));
  RETURN_IF_ERROR(
      WriteAll(fd_, absl::string_view(static_cast<const char*>(data), size_t(n)), path_));
  size_ += n;
  return absl::OkStatus();
}

absl::Status WritableFile::SyncAndClose() {
  if (fd_ < 0) return absl::FailedPreconditionError(absl::StrCat(path_, " is closed"));
  const int fd = fd_;
  fd_ = -1;
  if (fsync(fd) != 0) {
    const int err = errno;
    close(fd);
    return WriteErrnoToStatus(err, absl::StrCat("cannot fsync ", path_));
  }
  if (close(fd) != 0) return WriteErrnoToStatus(errno, absl::StrCat("cannot close ", path_));
  return absl::OkStatus();
}

absl::StatusOr<ReadableFile> ReadableFile::Open(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot open ", path));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    return absl::ErrnoToStatus(err, absl::StrCat("cannot stat ", path));
  }
  return ReadableFile(path, fd, static_cast<int64_t>(st.st_size));
}

ReadableFile::ReadableFile(ReadableFile&& other) noexcept
    : path_(std::move(other.path_)), fd_(other.fd_), size_(other.size_) {
  other.fd_ = -1;
}

ReadableFile::~ReadableFile() {
  if (fd_ >= 0) close(fd_);
}

absl::Status ReadableFile::ReadAt(int64_t offset, void* out, int64_t n) const {
  if (offset < 0 || n < 0 || offset + n > size_) {
    return absl::OutOfRangeError(absl::StrCat(path_, " is truncated: bytes [", offset, ", ",
                                              offset + n, ") are needed but the file has ", size_,
                                              " bytes"));
  }
  char* p = static_cast<char*>(out);
  while (n > 0) {
    const ssize_t done = pread(fd_, p, std::min(n, kMaxIo), offset);
    if (done < 0) {
      if (errno == EINTR) continue;
      return absl::ErrnoToStatus(errno, absl::StrCat("cannot read ", path_));
    }
    if (done == 0) {
      return absl::OutOfRangeError(
          absl::StrCat(path_, " ended early at byte ", offset, " (shrunk while reading?)"));
    }
    p += done;
    offset += done;
    n -= done;
  }
  return absl::OkStatus();
}

absl::StatusOr<FileLock> FileLock::TryAcquire(const std::string& path) {
  while (true) {
    const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot create ", path));
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      close(fd);
      if (err == EWOULDBLOCK) {
        return absl::UnavailableError(absl::StrCat(path, " is locked by another process"));
      }
      if (err == ENOLCK) {
        return absl::FailedPreconditionError(absl::StrCat(
            "cannot lock ", path, ": its file system does not support locks (flock: ",
            strerror(err), "; e.g. NFS without its lock service, or mounted with nolock)"));
      }
      return absl::ErrnoToStatus(err, absl::StrCat("cannot lock ", path));
    }
    // A holder removes the file as it releases the lock: a lock taken on a file that
    // no longer has the name protects nothing, so lock the file that has it now.
    if (CheckNamesOpenFile(path, fd).ok()) return FileLock(path, fd);
    close(fd);
  }
}

FileLock::FileLock(FileLock&& other) noexcept : path_(std::move(other.path_)), fd_(other.fd_) {
  other.fd_ = -1;
}

FileLock::~FileLock() {
  if (fd_ < 0) return;
  // While still locked (see TryAcquire), and only our own file: once someone removed
  // it, the name may lead to another process's lock file.
  if (CheckStillNamed().ok()) unlink(path_.c_str());
  close(fd_);
}

absl::Status FileLock::Write(const std::string& contents) {
  if (ftruncate(fd_, 0) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot truncate ", path_));
  }
  if (lseek(fd_, 0, SEEK_SET) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot seek in ", path_));
  }
  RETURN_IF_ERROR(WriteAll(fd_, contents, path_));
  if (fsync(fd_) != 0) return WriteErrnoToStatus(errno, absl::StrCat("cannot fsync ", path_));
  return absl::OkStatus();
}

absl::Status FileLock::CheckStillNamed() const { return CheckNamesOpenFile(path_, fd_); }

absl::StatusOr<std::string> ReadSmallFile(const std::string& path) {
  absl::StatusOr<ReadableFile> file = ReadableFile::Open(path);
  if (!file.ok()) return file.status();
  std::string contents(file->size(), '\0');
  absl::Status status = file->ReadAt(0, contents.data(), file->size());
  if (!status.ok()) return status;
  return contents;
}

absl::Status WriteFileDurably(const std::string& path, const std::string& contents) {
  return WriteFile(path, contents, Durability::kDurable);
}

absl::Status MakeDirs(const std::string& path) {
  if (PathExists(path) && !IsDirectory(path)) {
    return absl::FailedPreconditionError(absl::StrCat(path, " is a file, not a folder"));
  }
  std::error_code error;
  std::filesystem::create_directories(path, error);
  if (error) {
    return absl::ErrnoToStatus(error.value(), absl::StrCat("cannot create folder ", path));
  }
  return absl::OkStatus();
}

absl::Status MakeDir(const std::string& path) {
  if (mkdir(path.c_str(), 0755) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot create folder ", path));
  }
  return absl::OkStatus();
}

absl::Status Rename(const std::string& from, const std::string& to) {
  if (rename(from.c_str(), to.c_str()) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot rename ", from, " to ", to));
  }
  return absl::OkStatus();
}

absl::Status Exchange(const std::string& a, const std::string& b) {
  if (renameat2(AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(), RENAME_EXCHANGE) != 0) {
    const int err = errno;
    const std::string what = absl::StrCat("cannot exchange ", a, " with ", b);
    if (err == EINVAL || err == ENOSYS || err == EOPNOTSUPP) {
      return absl::UnimplementedError(absl::StrCat(
          what, ": the file system has no atomic exchange (renameat2 RENAME_EXCHANGE: ",
          strerror(err), ")"));
    }
    return absl::ErrnoToStatus(err, what);
  }
  return absl::OkStatus();
}

absl::Status RemoveTree(const std::string& path) {
  std::error_code error;
  std::filesystem::remove_all(path, error);
  if (error) return absl::ErrnoToStatus(error.value(), absl::StrCat("cannot remove ", path));
  return absl::OkStatus();
}

absl::Status RemoveFile(const std::string& path) {
  if (unlink(path.c_str()) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot remove ", path));
  }
  return absl::OkStatus();
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool SameFile(const std::string& a, const std::string& b) {
  struct stat sa, sb;
  return stat(a.c_str(), &sa) == 0 && stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

absl::StatusOr<std::vector<std::string>> ListDir(const std::string& path) {
  DIR* dir = opendir(path.c_str());
  if (dir == nullptr) return absl::ErrnoToStatus(errno, absl::StrCat("cannot list folder ", path));
  std::vector<std::string> names;
  while (struct dirent* entry = readdir(dir)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  closedir(dir);
  std::sort(names.begin(), names.end());
  return names;
}

std::string JoinPath(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  if (dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

}  // namespace conveyor
