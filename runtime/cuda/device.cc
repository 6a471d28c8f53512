#include "runtime/cuda/device.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace conveyor {
namespace {

std::string DescribeCudaError(const char* call, cudaError_t err) {
  return absl::StrCat(call, " failed: ", cudaGetErrorName(err), " (", static_cast<int>(err),
                      "): ", cudaGetErrorString(err));
}

}  // namespace

GpuInfo ProbeGpus() {
  GpuInfo info;
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    // Clear the runtime's last-error slot so later, unrelated checks don't see it.
    cudaGetLastError();
    info.error = DescribeCudaError("cudaGetDeviceCount", err);
    if (err == cudaErrorInsufficientDriver) {
      // The runtime reports a *missing* libcuda.so.1 with this same code, which
      // reads like a version problem; on a machine without GPUs it is the usual one.
      absl::StrAppend(&info.error, " (no NVIDIA driver, or one older than this CUDA runtime)");
    }
    return info;
  }
  if (count <= 0) {
    info.error = "cudaGetDeviceCount reported 0 devices";
    return info;
  }
  cudaDeviceProp prop;
  err = cudaGetDeviceProperties(&prop, 0);
  if (err != cudaSuccess) {
    cudaGetLastError();
    info.error = DescribeCudaError("cudaGetDeviceProperties(0)", err);
    return info;
  }
  info.count = count;
  info.name = prop.name;
  info.sm_major = prop.major;
  info.sm_minor = prop.minor;
  info.total_memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
  return info;
}

std::string DescribeBackend(const GpuInfo& info) {
  if (info.count == 0) {
    return absl::StrCat("CPU backend (no CUDA device found: ",
                        info.error.empty() ? "unknown reason" : info.error, ")");
  }
  const double gib = static_cast<double>(info.total_memory_bytes) / (1ull << 30);
  return absl::StrFormat("CUDA backend: %d x %s (sm_%d%d, %.0f GiB)", info.count, info.name,
                         info.sm_major, info.sm_minor, gib);
}

}  // namespace conveyor
