// Where the ranks of a job meet: for each process group, a key-value store (gloo's
// addresses, NCCL's unique id) and a progress board (which collective each rank has
// entered, to name the missing ranks after a timeout). Two kinds: a directory shared by
// the ranks (DirectoryRendezvous, CONVEYOR_RUN_DIR, what the built-in launcher uses) and
// a TCP store that global rank 0 serves at MASTER_ADDR:MASTER_PORT (TcpRendezvous, for
// nodes without a shared file system, as torchrun and Slurm scripts set them).
#ifndef CONVEYOR_PARALLEL_RENDEZVOUS_POINT_H_
#define CONVEYOR_PARALLEL_RENDEZVOUS_POINT_H_

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "gloo/rendezvous/store.h"
#include "parallel/progress_board.h"

namespace conveyor {

// gloo's store interface, whose failures throw gloo::IoException naming the store and
// the missing keys, over two primitives a backend provides: whether a key is there
// (never blocking) and reading one that is. get() and wait() poll Has() (Poller) until
// the store's timeout.
class RendezvousStore : public gloo::rendezvous::Store {
 public:
  // `where` names the store in messages, e.g. "rendezvous store /tmp/run/tp[0,1]".
  RendezvousStore(std::string where, std::chrono::milliseconds timeout)
      : where_(std::move(where)), timeout_(timeout) {}

  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

  // Throws gloo::IoException when the store cannot answer, as it then never will (a
  // TCP store whose connection was lost): get() and wait() end at once.
  virtual bool Has(const std::string& key) const = 0;

 protected:
  // The value of a key that Has() reported.
  virtual std::vector<char> Read(const std::string& key) = 0;
  const std::string& where() const { return where_; }

 private:
  std::string where_;
  std::chrono::milliseconds timeout_;
};

// A timeout as gloo and the stores count it: whole milliseconds, at least one, as gloo
// reads 0 as "no timeout" (a timeout under 1 ms, or a fifth of one under 5 ms, would
// otherwise wait forever).
inline std::chrono::milliseconds WholeMilliseconds(absl::Duration timeout) {
  return std::chrono::milliseconds(std::max<int64_t>(1, absl::ToInt64Milliseconds(timeout)));
}

// Waits for what nothing announces (a key of a store, a file on a shared file system) by
// looking again after an interval that grows from 1 ms to 20 ms. The time is measured on
// the steady clock, so a step of the wall clock (NTP) neither shortens nor stretches a
// wait. Usage: look; if not there and !Expired(), Sleep() and look again.
class Poller {
 public:
  explicit Poller(std::chrono::nanoseconds timeout)
      : start_(std::chrono::steady_clock::now()), timeout_(timeout) {}

  // Elapsed time is compared, not a deadline computed: start + an infinite timeout
  // (absl::InfiniteDuration, saturated to nanoseconds::max()) would overflow.
  bool Expired() const { return std::chrono::steady_clock::now() - start_ >= timeout_; }
  void Sleep();

 private:
  std::chrono::steady_clock::time_point start_;
  std::chrono::nanoseconds timeout_;
  std::chrono::milliseconds interval_{1};
};

class RendezvousPoint {
 public:
  virtual ~RendezvousPoint() = default;

  // For messages, e.g. "directory /tmp/run" or "TCP store node1:29500".
  virtual std::string Describe() const = 0;

  // The store of group `name`: keys of different groups never meet. get() and wait()
  // give up after `timeout`.
  virtual absl::StatusOr<std::unique_ptr<RendezvousStore>> OpenStore(
      const std::string& name, absl::Duration timeout) const = 0;

  // The progress board of group `name`, as group rank `rank` of `size`.
  virtual absl::StatusOr<std::unique_ptr<ProgressBoard>> OpenBoard(const std::string& name,
                                                                   int rank, int size) const = 0;
};

// Global rank `rank` was started with `world_size` ranks in all, global rank 0 with
// `rank0_world_size`: OK when they agree, else FailedPrecondition naming both and the
// fix. Both rendezvous check it as each rank meets rank 0; `where` names the meeting
// place, e.g. "TCP store node1:29500".
absl::Status CheckWorldSize(int rank, int world_size, int rank0_world_size,
                            absl::string_view where);

}  // namespace conveyor

#endif  // CONVEYOR_PARALLEL_RENDEZVOUS_POINT_H_
