// N "ranks" as threads of one test process: a Communicator per rank whose collectives
// meet in shared memory, so that multi-rank code runs without forking or gloo.
// Implements every operation on host buffers, reducing in rank order as gloo does
// (parallel/rank_order_reduction.h). Calls have no timeout: a rank that never arrives
// hangs the test.
#ifndef CONVEYOR_TESTS_UTIL_IN_PROCESS_WORLD_H_
#define CONVEYOR_TESTS_UTIL_IN_PROCESS_WORLD_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
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

  // Point-to-point, the building blocks of BatchSendRecv. Send copies the message into
  // the (from, to) mailbox and returns; Receive waits for that mailbox's oldest message
  // and fails when its size is not `bytes`. Messages of one direction match in send order.
  void Send(int from, int to, const void* data, int64_t bytes);
  absl::Status Receive(int from, int to, void* data, int64_t bytes);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<void*> posted_;
  int arrived_ = 0;
  int leaving_ = 0;
  int64_t generation_ = 0;
  std::map<std::pair<int, int>, std::deque<std::vector<char>>> mailboxes_;  // (from, to)
  std::vector<std::unique_ptr<Communicator>> comms_;
};

}  // namespace testing_util
}  // namespace conveyor

#endif  // CONVEYOR_TESTS_UTIL_IN_PROCESS_WORLD_H_
