// Finds out whether a CUDA device is usable, without ever failing hard: a CPU-only
// machine (no driver, no device, CUDA_VISIBLE_DEVICES="") is a normal configuration
// for Conveyor, which then runs its CPU backend.
#ifndef CONVEYOR_RUNTIME_CUDA_DEVICE_H_
#define CONVEYOR_RUNTIME_CUDA_DEVICE_H_

#include <cstdint>
#include <string>

namespace conveyor {

struct GpuInfo {
  int count = 0;  // Usable CUDA devices; 0 means "use the CPU backend".
  // Properties of device 0 (ranks pick devices by LOCAL_RANK; all are assumed alike).
  std::string name;
  int sm_major = 0;
  int sm_minor = 0;
  int64_t total_memory_bytes = 0;
  // Why count is 0, e.g. "cudaErrorNoDevice (100): no CUDA-capable device is
  // detected"; empty when a device was found.
  std::string error;
};

// Never crashes or aborts; any CUDA error becomes count == 0 with `error` set.
GpuInfo ProbeGpus();

// One line for logs, e.g. "CUDA backend: 1 x NVIDIA H200 (sm_90, 139 GiB)" or
// "CPU backend (no CUDA device found: cudaErrorInsufficientDriver (35): ...)".
std::string DescribeBackend(const GpuInfo& info);

}  // namespace conveyor

#endif  // CONVEYOR_RUNTIME_CUDA_DEVICE_H_
