// The backend a rank computes on (--device, --bf16): the model's ops and the
// optimizer's, over one device.
#ifndef CONVEYOR_TRAINER_BACKEND_H_
#define CONVEYOR_TRAINER_BACKEND_H_

#include <string>

#include "absl/status/statusor.h"
#include "parallel/device_transport.h"
#include "runtime/ops.h"
#include "runtime/optimizer_ops.h"
#include "trainer/config/resolved_config.h"

namespace conveyor {

struct Backend {
  const Ops* ops;
  const OptimizerOps* optimizer;
  std::string description;  // one line for the log, e.g. "CUDA backend (bf16): ..."
  // How the process groups move this backend's tensors (NCCL on CUDA); null on the
  // CPU, whose tensors gloo moves. Pass it to ParallelState.
  const DeviceTransport* transport = nullptr;
};

// The CPU backend: fp32, OpenBLAS.
Backend CpuBackend();

// --device cpu or auto: the CPU backend (auto stays on the CPU until the CUDA path has
// been checked on a GPU; see README), with --bf16 emulated in bf16
// (runtime/bf16_emulation_ops.h). --device cuda: selects GPU `local_rank`, installs its
// caching allocator and returns the CUDA backend, computing in bf16 with --bf16, else
// fp32, with NCCL as its transport; its objects live for the rest of the process. Fails,
// naming the flag, when no CUDA device is usable. Start the backend before the
// ParallelState: the groups' NCCL communicators need the selected GPU.
absl::StatusOr<Backend> StartBackend(const ResolvedConfig& resolved, int local_rank);

// One line on the device memory the run used, e.g. "GPU memory: peak 23.1 GiB in
// tensors, 24.0 GiB reserved; cudaMalloc 41 times for 120512 allocations"; empty on
// the CPU backend (the memory report covers it).
std::string DeviceMemorySummary(const Backend& backend);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_BACKEND_H_
