#include "parallel/rendezvous_point.h"

#include <algorithm>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "gloo/common/error.h"

namespace conveyor {

std::vector<char> RendezvousStore::get(const std::string& key) {
  wait({key}, timeout_);
  return Read(key);
}

void RendezvousStore::wait(const std::vector<std::string>& keys,
                           const std::chrono::milliseconds& timeout) {
  Poller poller(timeout);
  while (true) {
    std::vector<std::string> missing;
    for (const std::string& key : keys) {
      if (!Has(key)) missing.push_back(key);
    }
    if (missing.empty()) return;
    if (poller.Expired()) {
      throw gloo::IoException(absl::StrFormat("%s: timed out after %d ms waiting for key(s) %s",
                                              where_, timeout.count(),
                                              absl::StrJoin(missing, ", ")));
    }
    poller.Sleep();
  }
}

absl::Status CheckWorldSize(int rank, int world_size, int rank0_world_size,
                            absl::string_view where) {
  if (world_size == rank0_world_size) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrFormat(
      "the ranks meeting at %s disagree on the world size: global rank %d has WORLD_SIZE=%d, "
      "global rank 0 has WORLD_SIZE=%d; start every rank of the job with the same world size "
      "(WORLD_SIZE, or SLURM_NTASKS under srun)",
      where, rank, world_size, rank0_world_size));
}

void Poller::Sleep() {
  std::this_thread::sleep_for(interval_);
  interval_ = std::min(interval_ * 2, std::chrono::milliseconds(20));
}

}  // namespace conveyor
