#include "trainer/reporting/stdout_stream.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "absl/strings/str_cat.h"

namespace conveyor {

LineWriter::int_type LineWriter::overflow(int_type c) {
  if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
  pending_.push_back(traits_type::to_char_type(c));
  if (c == '\n') WriteCompleteLines();
  return c;
}

std::streamsize LineWriter::xsputn(const char* s, std::streamsize n) {
  pending_.append(s, static_cast<size_t>(n));
  if (std::memchr(s, '\n', static_cast<size_t>(n)) != nullptr) WriteCompleteLines();
  return n;
}

int LineWriter::sync() {
  Write(pending_.size());
  return 0;  // a failed write was reported; the stream stays usable for the run
}

void LineWriter::WriteCompleteLines() {
  const size_t end = pending_.rfind('\n');
  if (end != std::string::npos) Write(end + 1);
}

void LineWriter::Write(size_t n) {
  size_t done = 0;
  while (!failed_ && done < n) {
    const ssize_t w = ::write(fd_, pending_.data() + done, n - done);
    if (w >= 0) {
      done += static_cast<size_t>(w);
      continue;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {  // a non-blocking descriptor
      pollfd p{fd_, POLLOUT, 0};
      ::poll(&p, 1, -1);
      continue;
    }
    failed_ = true;
    const char* rank = std::getenv("RANK");
    const std::string line = absl::StrCat(
        "trainer: ", rank != nullptr ? absl::StrCat("rank ", rank, ": ") : "",
        "cannot write to stdout (", std::strerror(errno),
        errno == EPIPE ? ": its reader has closed it" : "",
        "); the run goes on without printing to stdout: its checkpoints, --metrics-file and "
        "--tensorboard-dir are written as asked\n");
    [[maybe_unused]] const ssize_t ignored = ::write(report_fd_, line.data(), line.size());
  }
  pending_.erase(0, n);
}

void SurviveFailedWrites() {
  // SIG_IGN survives fork and exec, so the ranks the launcher forks, and the process
  // main() re-executes for faster BLAS kernels, ignore it too.
  ::signal(SIGPIPE, SIG_IGN);
  ::signal(SIGXFSZ, SIG_IGN);
  static LineWriter* const writer = new LineWriter(STDOUT_FILENO, STDERR_FILENO);
  std::cout.rdbuf(writer);
}

}  // namespace conveyor
