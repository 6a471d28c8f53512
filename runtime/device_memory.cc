#include "runtime/device_memory.h"

#include <malloc.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace conveyor {
namespace {

// 64-byte alignment keeps BLAS and vector loads on cache-line boundaries.
constexpr size_t kHostAlignment = 64;
constexpr int kKeepInHeapBytes = 1 << 30;

std::atomic<bool> poison_host_memory{true};

// Host memory. Allocate fills its bytes with 0xff, a NaN in fp32 and bf16, while
// SetHostMemoryPoison says so (on the GPU the bytes are whatever the block held before).
class HostMemory : public DeviceMemory {
 public:
  // glibc serves a block over its mmap threshold (which rises to 32 MiB at most) with
  // fresh pages and unmaps it when freed, and trims the heap's free top: every step then
  // faults in its largest buffers anew (the [tokens, vocab] logits: 64 MiB, 34 ms a step
  // of page faults on a 2-CPU VM, against 2.7 ms reusing the pages). Up to 1 GiB, freed
  // blocks stay in the heap for the next step's buffers of the same sizes.
  HostMemory() {
    mallopt(M_MMAP_THRESHOLD, kKeepInHeapBytes);
    mallopt(M_TRIM_THRESHOLD, kKeepInHeapBytes);
  }

  void* Allocate(int64_t bytes) override {
    void* p = AlignedAllocate(bytes);
    if (poison_host_memory.load(std::memory_order_relaxed)) {
      std::memset(p, 0xff, static_cast<size_t>(bytes));
    }
    return p;
  }
  void* AllocateZeroed(int64_t bytes) override {
    void* p = AlignedAllocate(bytes);
    std::memset(p, 0, static_cast<size_t>(bytes));
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

 private:
  static void* AlignedAllocate(int64_t bytes) {
    const size_t padded =
        (static_cast<size_t>(bytes) + kHostAlignment - 1) / kHostAlignment * kHostAlignment;
    void* p = std::aligned_alloc(kHostAlignment, padded == 0 ? kHostAlignment : padded);
    if (p == nullptr) {
      std::fprintf(stderr, "conveyor: out of host memory allocating %lld bytes (%.2f GiB). %s\n",
                   static_cast<long long>(bytes), static_cast<double>(bytes) / (1 << 30),
                   kOutOfMemoryAdvice);
      std::exit(1);
    }
    return p;
  }
};

// The installed memory of each device: the host's built in, CUDA's once registered.
std::atomic<DeviceMemory*>& Installed(Device device) {
  static std::atomic<DeviceMemory*> host{new HostMemory()};
  static std::atomic<DeviceMemory*> cuda{nullptr};
  return device == Device::kCpu ? host : cuda;
}

}  // namespace

void SetHostMemoryPoison(bool on) { poison_host_memory = on; }

absl::string_view DeviceName(Device device) { return device == Device::kCpu ? "cpu" : "cuda"; }

DeviceMemory& MemoryOf(Device device) {
  DeviceMemory* memory = Installed(device).load();
  if (memory == nullptr) {
    std::fprintf(stderr, "conveyor: a CUDA tensor was created before the CUDA backend started\n");
    std::abort();  // a programming error, not a user's
  }
  return *memory;
}

void RegisterDeviceMemory(Device device, DeviceMemory* memory) { Installed(device).store(memory); }

}  // namespace conveyor
