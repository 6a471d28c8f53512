#include "runtime/device_memory.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace conveyor {
namespace {

// 64-byte alignment keeps BLAS and vector loads on cache-line boundaries.
constexpr size_t kHostAlignment = 64;

class HostMemory : public DeviceMemory {
 public:
  void* AllocateZeroed(int64_t bytes) override {
    const size_t padded =
        (static_cast<size_t>(bytes) + kHostAlignment - 1) / kHostAlignment * kHostAlignment;
    void* p = std::aligned_alloc(kHostAlignment, padded == 0 ? kHostAlignment : padded);
    if (p == nullptr) {
      std::fprintf(stderr, "conveyor: out of host memory allocating %lld bytes\n",
                   static_cast<long long>(bytes));
      std::exit(1);
    }
    std::memset(p, 0, padded);
    return p;
  }
  void Free(void* p, int64_t) override { std::free(p); }
  void Zero(void* p, int64_t bytes) override { std::memset(p, 0, bytes); }
  void Copy(void* dst, const void* src, int64_t bytes) override { std::memcpy(dst, src, bytes); }
  void CopyFromHost(void* dst, const void* src, int64_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  void CopyToHost(void* dst, const void* src, int64_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
};

std::atomic<DeviceMemory*> cuda_memory{nullptr};

}  // namespace

absl::string_view DeviceName(Device device) { return device == Device::kCpu ? "cpu" : "cuda"; }

DeviceMemory& MemoryOf(Device device) {
  static HostMemory* host = new HostMemory();
  if (device == Device::kCpu) return *host;
  DeviceMemory* cuda = cuda_memory.load();
  if (cuda == nullptr) {
    std::fprintf(stderr, "conveyor: a CUDA tensor was created before the CUDA backend started\n");
    std::abort();  // a programming error, not a user's
  }
  return *cuda;
}

void RegisterDeviceMemory(Device device, DeviceMemory* memory) {
  if (device == Device::kCuda) cuda_memory.store(memory);
}

}  // namespace conveyor
