// Scalars to a TensorBoard event file, written by a background thread so that logging
// never waits for the disk: Add puts a scalar on a bounded queue and returns; the
// thread writes whatever is queued and flushes it to the kernel, so a run killed
// mid-way keeps every scalar the thread got to (normally all but the last moments').
// When the queue is full (the disk stalls for longer than --tensorboard-queue-size
// scalars take to log), Add drops the scalar and counts it rather than block a step.
#ifndef CONVEYOR_TRAINER_REPORTING_TENSORBOARD_SCALAR_WRITER_H_
#define CONVEYOR_TRAINER_REPORTING_TENSORBOARD_SCALAR_WRITER_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainer/reporting/tensorboard/event_file.h"

namespace conveyor::tensorboard {

class ScalarWriter {
 public:
  // A new event file in `dir` (EventFile::Create) and the thread that writes it;
  // at most `queue_size` scalars wait at once.
  static absl::StatusOr<std::unique_ptr<ScalarWriter>> Start(const std::string& dir,
                                                             int queue_size);
  ~ScalarWriter();  // Close()s, ignoring its status

  // `value` under `tag` at x-axis `step`, stamped with the current wall time.
  void Add(const std::string& tag, double value, int64_t step);

  // Writes what is queued and stops the thread; the first write error, if any (the
  // thread stops writing after one). Later calls return the same.
  absl::Status Close();

  // Scalars Add dropped because the queue was full.
  int64_t dropped() const;
  const std::string& path() const { return file_->path(); }

 private:
  ScalarWriter(std::unique_ptr<EventFile> file, int queue_size);
  void WriteLoop();

  const std::unique_ptr<EventFile> file_;
  const size_t queue_size_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Event> queue_;  // guarded by mutex_
  bool closing_ = false;     // guarded by mutex_
  int64_t dropped_ = 0;      // guarded by mutex_
  absl::Status status_;      // the thread's; read after it is joined
  std::thread thread_;
};

}  // namespace conveyor::tensorboard

#endif  // CONVEYOR_TRAINER_REPORTING_TENSORBOARD_SCALAR_WRITER_H_
