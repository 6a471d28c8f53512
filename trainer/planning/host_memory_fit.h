// Whether a CPU run fits the host memory it may use, checked before any rank starts.
// Under a memory limit (a container's or a Slurm job's cgroup) a run that does not fit
// is killed by the kernel with no message, after its start-up; the memory model
// (--dry-run) predicts each rank's peak, so the run can be refused up front instead.
#ifndef CONVEYOR_TRAINER_PLANNING_HOST_MEMORY_FIT_H_
#define CONVEYOR_TRAINER_PLANNING_HOST_MEMORY_FIT_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/model_shape.h"
#include "runtime/host_memory.h"
#include "trainer/config/resolved_config.h"

namespace conveyor {

// The ranks that share this machine's memory: `first_rank` and the `count` global ranks
// from it (a launcher places consecutive ranks on a node).
struct RanksOnHost {
  int first_rank = 0;
  int count = 1;
};

// What the ranks' processes on this host hold before their first tensor exists: the
// program and its libraries, heaps, BLAS and gloo buffers. About 200 to 260 MB for one
// CPU rank (here: VmHWM 203 MB when the check runs; 217 MB at the peak of the tiny
// model, whose tensors are 13 MB), more than many models' own memory, so the check
// counts it: without it a run under a tight limit passed the check and was killed.
struct StartupMemory {
  int64_t bytes = 0;
  std::string description;  // how it was counted, for the messages
};

// Measured, not guessed: `self` is this process's resident memory before any tensor
// (ThisProcessMemory()). Its mapped files (the peak less the anonymous part) are counted
// once, as the ranks map the same files. Its anonymous part counts once per process:
// once for one process and for the built-in launcher, whose forked ranks share it copy
// on write, or per rank when each rank is a program of its own (`own_processes`: torchrun,
// srun). Each rank then adds what it allocates on its own: kRankPrivateBytes and, per BLAS
// thread (`blas_threads`), kBlasBytesPerThread.
StartupMemory RanksStartupMemory(const ProcessMemory& self, const RanksOnHost& ranks,
                                 bool own_processes, int blas_threads);

// Measured on this machine's OpenBLAS 0.3 and gloo: a forked CPU rank's private pages
// beyond its tensors are 5.3 MB (the tiny model, 2 BLAS threads), rounded up for gloo's
// buffers of larger groups.
inline constexpr int64_t kRankPrivateBytes = int64_t{8} << 20;
// OpenBLAS's sgemm (2048 x 2048 x 2048) grows the resident set by 3.4 MB on one thread and
// 6.2 MB on 16 (per-thread packing buffers): 0.19 MB a thread, rounded up.
inline constexpr int64_t kBlasBytesPerThread = int64_t{256} << 10;

// The predicted peak bytes (model state and activations, memory_model.h) of the ranks
// of `resolved` that run on this host, summed.
absl::StatusOr<int64_t> PredictedHostBytes(const ResolvedConfig& resolved,
                                           const RanksOnHost& ranks);

// OK on the CUDA backend (model state lives on the GPUs) and when the prediction and
// `startup` fit `limit`; else ResourceExhausted naming the figures, where the limit comes
// from, and the flags that make a step fit.
absl::Status CheckRunFitsHostMemory(const ResolvedConfig& resolved, const RanksOnHost& ranks,
                                    const StartupMemory& startup,
                                    const HostMemoryLimit& limit = HostMemoryAvailable());

// --dry-run's line on this machine: "plan: host memory of the 4 ranks on this machine:
// 1.2 GiB predicted (of which 280.0 MiB before any tensor), 15.5 GiB usable (physical
// memory)"; empty on the CUDA backend.
std::string HostMemoryLine(const ResolvedConfig& resolved, const RanksOnHost& ranks,
                           const StartupMemory& startup,
                           const HostMemoryLimit& limit = HostMemoryAvailable());

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_PLANNING_HOST_MEMORY_FIT_H_
