// N "ranks" as threads of one test process: a Communicator per rank whose collectives
// meet in shared memory, so that multi-rank saves run without forking or gloo.
// Implements what the checkpoint library uses (Barrier, Broadcast, all-reduces,
// all-gather); point-to-point returns Unimplemented.
#ifndef CONVEYOR_TESTS_TRAINER_CHECKPOINT_IN_PROCESS_WORLD_H_
#define CONVEYOR_TESTS_TRAINER_CHECKPOINT_IN_PROCESS_WORLD_H_

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "parallel/communicator.h"

namespace conveyor {
namespace testing_util {

class InProcessWorld {
 public:
  explicit InProcessWorld(int size);
  ~InProcessWorld();
  int size() const { return static_cast<int>(comms_.size()); }
  Communicator& rank(int r) { return *comms_[r]; }

  // Runs fn(rank, communicator) on one thread per rank and waits for all of them.
  // Returns each rank's status.
  std::vector<absl::Status> Run(const std::function<absl::Status(int, Communicator&)>& fn);

  // Every rank posts its buffer pointer, `fn` runs once with all of them (on the last
  // rank to arrive), then every rank leaves. The building block of the collectives.
  void Meet(int rank, void* buffer, const std::function<void(std::vector<void*>&)>& fn);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<void*> posted_;
  int arrived_ = 0;
  int leaving_ = 0;
  int64_t generation_ = 0;
  std::vector<std::unique_ptr<Communicator>> comms_;
};

}  // namespace testing_util
}  // namespace conveyor

#endif  // CONVEYOR_TESTS_TRAINER_CHECKPOINT_IN_PROCESS_WORLD_H_
