// The POSIX file primitives every package shares: the one loop that writes a whole
// buffer to a file descriptor, and whether a path exists. Whole-file writes built on
// them are in atomic_file.h; the checkpoint's files in trainer/checkpoint/file_io.h.
#ifndef CONVEYOR_BASE_FILE_UTIL_H_
#define CONVEYOR_BASE_FILE_UTIL_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace conveyor {

// Writes all of `contents` at `fd`'s offset, retrying short writes and EINTR. A
// failure names `path` and is a failure while running (WriteErrnoToStatus in
// exit_code.h): ResourceExhausted when the disk or quota is full, Unavailable otherwise.
absl::Status WriteAll(int fd, absl::string_view contents, const std::string& path);

// Whether `path` names anything stat(2) can see (links followed).
bool PathExists(const std::string& path);

}  // namespace conveyor

#endif  // CONVEYOR_BASE_FILE_UTIL_H_
