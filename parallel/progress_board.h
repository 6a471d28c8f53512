// Where each rank of a group records the collective it has entered, so that a rank
// whose collective timed out can name the ranks that never arrived. The transports
// cannot tell: gloo's first timeout closes every connection of the context, and NCCL
// reports nothing per peer. Posting is cheap and best effort; the board is read only
// after a failure, for diagnostics, never for control.
//
// FileProgressBoard keeps one file in the group's rendezvous directory, one fixed-size
// slot per group rank, written with a single pwrite (about a microsecond; no rename, no
// new file). On a file system shared across nodes, writes may show up late.
#ifndef CONVEYOR_PARALLEL_PROGRESS_BOARD_H_
#define CONVEYOR_PARALLEL_PROGRESS_BOARD_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace conveyor {

class ProgressBoard {
 public:
  struct Entry {
    int64_t seq = -1;      // collectives entered so far; -1 = never posted
    std::string activity;  // e.g. "AllReduceSum", "BatchSendRecv"
    bool unknown = false;  // the board could not be read (its store did not answer)
  };

  virtual ~ProgressBoard() = default;

  // Best effort: a failed post only loses diagnostics.
  virtual void Post(int64_t seq, absl::string_view activity) = 0;
  // One entry per group rank.
  virtual std::vector<Entry> Read() const = 0;
};

class FileProgressBoard : public ProgressBoard {
 public:
  static absl::StatusOr<std::unique_ptr<ProgressBoard>> Open(const std::string& path, int rank,
                                                             int size);
  ~FileProgressBoard() override;

  void Post(int64_t seq, absl::string_view activity) override;
  std::vector<Entry> Read() const override;

 private:
  FileProgressBoard(int fd, int rank, int size) : fd_(fd), rank_(rank), size_(size) {}

  int fd_;
  int rank_;
  int size_;
};

}  // namespace conveyor

#endif  // CONVEYOR_PARALLEL_PROGRESS_BOARD_H_
