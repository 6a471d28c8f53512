#include "trainer/reporting/line_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/exit_code.h"

namespace conveyor {
namespace {

absl::Status WriteFailure(int error, const std::string& what) {
  return OutputWriteFailure(absl::ErrnoToStatus(error, what), error);
}

}  // namespace

absl::Status OutputWriteFailure(const absl::Status& status, int error) {
  if (status.ok()) return status;
  const bool no_room = WriteFailureCode(error) == absl::StatusCode::kResourceExhausted ||
                       status.code() == absl::StatusCode::kResourceExhausted;
  return absl::Status(
      no_room ? absl::StatusCode::kResourceExhausted : absl::StatusCode::kUnavailable,
      status.message());
}

absl::StatusOr<std::unique_ptr<LineFile>> LineFile::Open(const std::string& flag,
                                                         const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat(flag, " ", path, ": cannot open for appending"));
  }
  std::unique_ptr<LineFile> file(new LineFile());
  file->buffer_.fd = fd;
  file->buffer_.flag = flag;
  file->buffer_.path = path;
  return file;
}

LineFile::~LineFile() {
  if (buffer_.fd >= 0) Close().IgnoreError();  // the run's error, if any, was reported
}

absl::Status LineFile::Close() {
  if (buffer_.fd < 0) return buffer_.status;
  buffer_.WriteLines(/*all=*/true);
  if (::close(buffer_.fd) != 0 && buffer_.status.ok()) {
    buffer_.status =
        WriteFailure(errno, absl::StrCat(buffer_.flag, " ", buffer_.path, ": cannot close"));
  }
  buffer_.fd = -1;
  return buffer_.status;
}

LineFile::Buffer::int_type LineFile::Buffer::overflow(int_type c) {
  if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
  pending.push_back(traits_type::to_char_type(c));
  if (c != '\n' || WriteLines(/*all=*/false)) return c;
  return traits_type::eof();
}

std::streamsize LineFile::Buffer::xsputn(const char* s, std::streamsize n) {
  pending.append(s, static_cast<size_t>(n));
  if (std::memchr(s, '\n', static_cast<size_t>(n)) == nullptr || WriteLines(/*all=*/false)) {
    return n;
  }
  return 0;
}

int LineFile::Buffer::sync() { return WriteLines(/*all=*/true) ? 0 : -1; }

bool LineFile::Buffer::WriteLines(bool all) {
  if (!status.ok() || fd < 0) {
    pending.clear();
    return status.ok();
  }
  const size_t end = all ? pending.size() : pending.rfind('\n') + 1;  // npos + 1 == 0
  // The file's size before these lines: what a failed write is cut back to.
  const off_t before = ::lseek(fd, 0, SEEK_END);
  for (size_t done = 0; done < end;) {
    const ssize_t n = ::write(fd, pending.data() + done, end - done);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    const int error = n < 0 ? errno : EIO;
    // Not a regular file (/dev/full, a pipe): nothing to cut back.
    const bool cut = before >= 0 && ::ftruncate(fd, before) == 0;
    status = WriteFailure(error,
                          absl::StrCat(flag, " ", path, ": cannot write",
                                       cut ? " (the partly written line was removed again)" : ""));
    pending.clear();
    return false;
  }
  pending.erase(0, end);
  return true;
}

absl::Status WriteLine(std::ostream& out, absl::string_view line, absl::string_view flag) {
  out << line << '\n';
  out.flush();
  if (out) return absl::OkStatus();
  const auto* file = dynamic_cast<const LineFile*>(&out);
  const absl::Status failed = file != nullptr && !file->status().ok()
                                  ? file->status()
                                  : absl::DataLossError(absl::StrCat(flag, ": cannot write"));
  return absl::Status(
      failed.code(),
      absl::StrCat(failed.message(),
                   "; the run stops here, so that the file holds every line before this one "
                   "whole and none is missing in between: make room (or choose another path) "
                   "and resume from the last checkpoint"));
}

}  // namespace conveyor
