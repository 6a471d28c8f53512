// stdout that a closed reader cannot kill. `trainer ... | head` closes the pipe after a
// few lines; by default the next write raises SIGPIPE and every rank dies without a word,
// losing the training since the last checkpoint. A log viewer going away is no reason
// to stop a run (its checkpoints, --metrics-file and --tensorboard-dir are its product),
// so the trainer ignores SIGPIPE (the launcher's ranks inherit that), and std::cout
// writes whole lines to fd 1 until a write fails; then it says so once on stderr, naming
// the error, and drops what follows while the run goes on.
#ifndef CONVEYOR_TRAINER_REPORTING_STDOUT_STREAM_H_
#define CONVEYOR_TRAINER_REPORTING_STDOUT_STREAM_H_

#include <streambuf>
#include <string>

namespace conveyor {

// A streambuf over a file descriptor that writes complete lines with write(2) (a line
// at a time, so that ranks sharing the descriptor do not cut each other's lines) and,
// after the first failed write, reports it once on `report_fd` and discards the rest.
class LineWriter : public std::streambuf {
 public:
  LineWriter(int fd, int report_fd) : fd_(fd), report_fd_(report_fd) {}

  // Whether a write has failed (the descriptor's reader went away, or its disk is full).
  bool failed() const { return failed_; }

 protected:
  int_type overflow(int_type c) override;
  std::streamsize xsputn(const char* s, std::streamsize n) override;
  int sync() override;  // writes what is pending, complete line or not

 private:
  // Writes pending_[0, n) and erases it.
  void Write(size_t n);
  void WriteCompleteLines();

  const int fd_;
  const int report_fd_;
  bool failed_ = false;
  std::string pending_;
};

// Ignores SIGPIPE in this process and the processes it forks or execs, and points
// std::cout at a LineWriter over fd 1 (reported on fd 2). Ignores SIGXFSZ too: a file
// that reaches the size limit (ulimit -f) then fails its write with EFBIG, which the
// writer reports naming the file, instead of the process dying without a word. Call
// first in main().
void SurviveFailedWrites();

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_REPORTING_STDOUT_STREAM_H_
