// Replacing a file so that a reader sees all of its new contents or none of them.
//
// Durability follows the usual POSIX rules: data reaches the disk only after fsync of
// the file, and a new or renamed name only after fsync of its folder; rename(2)
// replaces a file atomically. Errors are absl::ErrnoToStatus's: "cannot <call> <path>:
// <strerror>", with Abseil's choice of code for the errno.
//
// Not here, deliberately: a LevelDB-style Env interface through which every
// file operation would go, so that crash tests could drop the writes not yet synced.
// The crash tests kill processes (tests/trainer/checkpoint/crash_safety_test.cc), which
// loses no synced or unsynced write the kernel accepted; only a machine crash drops
// unsynced writes, and simulating one would need every reader and writer (checkpoint,
// data, rendezvous) routed through such an Env. Worth it once a test needs to lose
// unsynced data; until then it would be an interface with one implementation.
#ifndef CONVEYOR_BASE_ATOMIC_FILE_H_
#define CONVEYOR_BASE_ATOMIC_FILE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace conveyor {

// What WriteFileAtomically promises once it returns.
enum class Durability {
  // While the machine runs, readers see the old file (or none) or all of the new one.
  // After a machine crash the file may be the old one, missing, or (on some file
  // systems) empty: for files that live no longer than a run, such as rendezvous files.
  kVisible,
  // Also across a machine crash: the file is fsynced before the rename, and its folder
  // after it.
  kDurable,
};

// Creates or truncates `path` and writes `contents` to it, fsynced when `durability`
// says so (not atomic: a crash can leave it partly written).
absl::Status WriteFile(const std::string& path, absl::string_view contents, Durability durability);

// Writes `contents` to `temp_path` (created or truncated), then renames it to `path`.
// `temp_path` must be in `path`'s folder (rename(2) does not cross file systems) and
// unique among the writers that may write `path` at once. On failure `temp_path` is
// removed and `path` is as it was.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents,
                                 const std::string& temp_path, Durability durability);

// fsync of a folder, so that names created or renamed in it survive a crash.
absl::Status SyncDir(const std::string& path);

// The folder that holds `path`: "." for a bare name, "/" for a name at the root.
std::string FolderOf(const std::string& path);

}  // namespace conveyor

#endif  // CONVEYOR_BASE_ATOMIC_FILE_H_
