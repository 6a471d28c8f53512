// The few POSIX file operations a crash-safe checkpoint needs, as absl::Status.
//
// Durability follows the usual rules: data reaches the disk only after fsync of the
// file, and a new or renamed name only after fsync of its folder; rename(2) replaces
// a file atomically. Every error names the path and the failing call.
#ifndef CONVEYOR_TRAINER_CHECKPOINT_FILE_IO_H_
#define CONVEYOR_TRAINER_CHECKPOINT_FILE_IO_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/file_util.h"  // PathExists, for the callers of these helpers

namespace conveyor {

// An append-only file opened for writing (created or truncated). Close() fsyncs;
// the destructor closes without fsync (an abandoned file).
class WritableFile {
 public:
  static absl::StatusOr<WritableFile> Create(const std::string& path);
  WritableFile(WritableFile&& other) noexcept;
  WritableFile& operator=(WritableFile&& other) = delete;
  WritableFile(const WritableFile&) = delete;
  ~WritableFile();

  absl::Status Append(const void* data, int64_t n);
  // fsync, then close.
  absl::Status SyncAndClose();
  int64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  WritableFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string path_;
  int fd_;
  int64_t size_ = 0;
};

// A file opened for positioned reads.
class ReadableFile {
 public:
  static absl::StatusOr<ReadableFile> Open(const std::string& path);
  ReadableFile(ReadableFile&& other) noexcept;
  ReadableFile& operator=(ReadableFile&& other) = delete;
  ReadableFile(const ReadableFile&) = delete;
  ~ReadableFile();

  // Exactly n bytes at `offset`; OutOfRange naming the file when it is shorter.
  absl::Status ReadAt(int64_t offset, void* out, int64_t n) const;
  int64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  ReadableFile(std::string path, int fd, int64_t size)
      : path_(std::move(path)), fd_(fd), size_(size) {}
  std::string path_;
  int fd_;
  int64_t size_;
};

// An exclusive advisory lock (flock(2)) on a file that exists while it is held. The
// kernel releases it when the process ends, however it ends.
class FileLock {
 public:
  // Creates `path` when missing and locks it without waiting; Unavailable naming the
  // path when another open file holds the lock (another process, or another FileLock);
  // FailedPrecondition saying so when the file system cannot lock at all (ENOLCK: NFS
  // without its lock service, or mounted `nolock`).
  static absl::StatusOr<FileLock> TryAcquire(const std::string& path);
  FileLock(FileLock&& other) noexcept;
  FileLock& operator=(FileLock&& other) = delete;
  FileLock(const FileLock&) = delete;
  // Removes the file when `path` still names it, then releases the lock.
  ~FileLock();

  // Replaces the file's contents (e.g. who holds the lock, for others' messages) and
  // fsyncs them, so that a reader on another host of a network file system sees them.
  absl::Status Write(const std::string& contents);
  // OK while `path` still names the locked file; NotFound when the name is gone (the
  // file or its folder was removed or moved), FailedPrecondition when it now names
  // another file (someone removed ours and another process created a new one). A lock
  // on a file that lost its name keeps nobody out.
  absl::Status CheckStillNamed() const;
  const std::string& path() const { return path_; }

 private:
  FileLock(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string path_;
  int fd_;
};

// Whole-file helpers for small files (manifests, the latest-iteration file).
// NotFound when the file does not exist.
absl::StatusOr<std::string> ReadSmallFile(const std::string& path);
// Creates or truncates `path`, writes `contents`, fsyncs and closes.
absl::Status WriteFileDurably(const std::string& path, const std::string& contents);

// `path` and its missing parents; existing folders are fine. FailedPrecondition when
// `path` is a file.
absl::Status MakeDirs(const std::string& path);
// One new folder inside an existing one (mkdir(2)): NotFound when the parent is gone,
// which MakeDirs would quietly recreate.
absl::Status MakeDir(const std::string& path);
// rename(2): atomic replacement of a file, or of an empty/absent folder.
absl::Status Rename(const std::string& from, const std::string& to);
// Atomically swaps two existing names (renameat2 RENAME_EXCHANGE): replaces a
// non-empty folder without a moment where neither the old nor the new one exists.
// Unimplemented when the file system or kernel has no such operation (NFS rejects
// the flag with EINVAL; old kernels lack renameat2, ENOSYS).
absl::Status Exchange(const std::string& a, const std::string& b);
// rm -rf; absent is fine.
absl::Status RemoveTree(const std::string& path);
absl::Status RemoveFile(const std::string& path);
// Whether `path` exists and is a folder (after following links).
bool IsDirectory(const std::string& path);
// Whether two paths name the same file or folder (after following links): false when
// either does not exist.
bool SameFile(const std::string& a, const std::string& b);
// Names (not paths) in a folder, sorted; NotFound when it does not exist.
absl::StatusOr<std::vector<std::string>> ListDir(const std::string& path);

std::string JoinPath(const std::string& dir, const std::string& name);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_CHECKPOINT_FILE_IO_H_
