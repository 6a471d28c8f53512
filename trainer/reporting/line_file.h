// A file of lines that a run appends to (--metrics-file's JSON lines), whose every
// write is checked. A line reaches the file whole or not at all: each goes out in
// write(2) calls of its own, and a write that fails (a full disk, a quota, an I/O error)
// is cut back to the file's size before the line, so a reader never meets half a JSON
// object. The failure is kept, naming the file and the errno text, for WriteLine to
// return; later lines are dropped.
#ifndef CONVEYOR_TRAINER_REPORTING_LINE_FILE_H_
#define CONVEYOR_TRAINER_REPORTING_LINE_FILE_H_

#include <memory>
#include <ostream>
#include <streambuf>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace conveyor {

class LineFile : public std::ostream {
 public:
  // Opens `path` for appending (created if missing: a resumed run adds its lines after
  // the earlier run's). `flag` ("--metrics-file") names it in errors.
  static absl::StatusOr<std::unique_ptr<LineFile>> Open(const std::string& flag,
                                                        const std::string& path);
  ~LineFile() override;

  // OK, or the first failed write.
  absl::Status status() const { return buffer_.status; }

  // Writes what is pending and closes the file, checked (NFS may report a failed
  // write-back only at close).
  absl::Status Close();

 private:
  struct Buffer : std::streambuf {
    int fd = -1;
    std::string flag, path;
    std::string pending;
    absl::Status status;

    int_type overflow(int_type c) override;
    std::streamsize xsputn(const char* s, std::streamsize n) override;
    int sync() override;
    // Writes the complete lines of `pending` (all of it when `all`); false on failure.
    bool WriteLines(bool all);
  };

  LineFile() : std::ostream(&buffer_) {}

  Buffer buffer_;
};

// A failed write of an output file the run could open (its path was checked before
// training): a failure while running (exit 1, base/exit_code.h), whatever code Abseil
// gave its errno (EFBIG past `ulimit -f` is InvalidArgument there), with the message
// kept. ResourceExhausted for a full disk, a quota or a size limit (`error` is the
// errno, when known), else Unavailable.
absl::Status OutputWriteFailure(const absl::Status& status, int error = 0);

// Writes `line` and a newline to `out` and flushes it: the error of a LineFile (or of
// any stream that went bad), naming `flag`, the file and what the failure leaves.
absl::Status WriteLine(std::ostream& out, absl::string_view line, absl::string_view flag);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_REPORTING_LINE_FILE_H_
