// One TensorBoard event file: created in a run's --tensorboard-dir under the name
// TensorBoard looks for (events.out.tfevents.<seconds>.<host>.<pid>), opened with
// the version event every reader expects first, then appended to.
#ifndef CONVEYOR_TRAINER_REPORTING_TENSORBOARD_EVENT_FILE_H_
#define CONVEYOR_TRAINER_REPORTING_TENSORBOARD_EVENT_FILE_H_

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/tensorboard/event.pb.h"

namespace conveyor::tensorboard {

class EventFile {
 public:
  // Creates `dir` (and its parents) if missing, then a new event file in it. A new
  // file per run, as TensorBoard's writers do: a resumed run's file sits next to the
  // earlier ones and TensorBoard shows them as one run.
  static absl::StatusOr<std::unique_ptr<EventFile>> Create(const std::string& dir);

  // Appends the events as framed records, then hands them to the kernel, so that
  // they survive the process being killed (not a machine crash: no fsync per batch).
  absl::Status Append(const std::vector<Event>& events);

  const std::string& path() const { return path_; }

 private:
  explicit EventFile(std::string path) : path_(std::move(path)) {}

  const std::string path_;
  std::ofstream out_;
};

}  // namespace conveyor::tensorboard

#endif  // CONVEYOR_TRAINER_REPORTING_TENSORBOARD_EVENT_FILE_H_
