// Whether a CPU run fits the host memory it may use, checked before any rank starts.
// Under a memory limit (a container's or a Slurm job's cgroup) a run that does not fit
// is killed by the kernel with no message, after its start-up; the memory model
// (--dry-run) predicts each rank's peak, so the run can be refused up front instead.
#ifndef CONVEYOR_TRAINER_HOST_MEMORY_FIT_H_
#define CONVEYOR_TRAINER_HOST_MEMORY_FIT_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/model_shape.h"
#include "runtime/host_memory.h"
#include "trainer/resolved_config.h"

namespace conveyor {

// The ranks that share this machine's memory: `first_rank` and the `count` global ranks
// from it (a launcher places consecutive ranks on a node).
struct RanksOnHost {
  int first_rank = 0;
  int count = 1;
};

// The predicted peak bytes (model state and activations, memory_model.h) of the ranks
// of `resolved` that run on this host, summed.
absl::StatusOr<int64_t> PredictedHostBytes(const ResolvedConfig& resolved, const ModelShape& shape,
                                           const RanksOnHost& ranks);

// OK on the CUDA backend (model state lives on the GPUs) and when the prediction fits
// `limit`; else ResourceExhausted naming both figures, where the limit comes from, and
// the flags that make a step fit.
absl::Status CheckRunFitsHostMemory(const ResolvedConfig& resolved, const ModelShape& shape,
                                    const RanksOnHost& ranks,
                                    const HostMemoryLimit& limit = HostMemoryAvailable());

// --dry-run's line on this machine: "plan: host memory of the 4 ranks on this machine:
// 1.2 GiB predicted, 15.5 GiB usable (physical memory)"; empty on the CUDA backend.
std::string HostMemoryLine(const ResolvedConfig& resolved, const ModelShape& shape,
                           const RanksOnHost& ranks,
                           const HostMemoryLimit& limit = HostMemoryAvailable());

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_HOST_MEMORY_FIT_H_
