#include "runtime/cuda/cuda_memory.h"

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/memory_tracker.h"

namespace conveyor::cuda {
namespace {

// Makes the memory's device current on the calling thread, so that a thread that never
// called cudaSetDevice (e.g. the gradient-reduction thread) still allocates on, and queues
// work to, the rank's GPU. It stays current afterwards: a process drives one GPU, and
// restoring a fresh thread's default (device 0) would create a context on GPU 0 for every
// rank of the node (hundreds of MiB each, and an error on an exclusive-process GPU).
void MakeCurrent(int device) {
  int current = -1;
  CUDA_CHECK(cudaGetDevice(&current));
  if (current != device) CUDA_CHECK(cudaSetDevice(device));
}

// cudaMalloc/cudaFree, called only by the caching allocator (under its lock, with the device
// made current by the caller).
class CudaBacking : public RawDeviceAllocator {
 public:
  void* Allocate(int64_t bytes) override {
    void* p = nullptr;
    const cudaError_t err = cudaMalloc(&p, static_cast<size_t>(bytes));
    if (err == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // not sticky: clear it so later checks don't report it again
      return nullptr;
    }
    CUDA_CHECK(err);
    return p;
  }
  void Release(void* p, int64_t) override { CUDA_CHECK(cudaFree(p)); }
};

std::string Bytes(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (bytes >= (int64_t{1} << 30)) return absl::StrFormat("%.2f GiB", b / (1 << 30));
  return absl::StrFormat("%.1f MiB", b / (1 << 20));
}

class CudaMemory : public DeviceMemory {
 public:
  explicit CudaMemory(int device) : device_(device), allocator_(&backing_) {}

  // AllocateZeroed is DeviceMemory's: Allocate, then Zero (a cudaMemsetAsync).
  void* Allocate(int64_t bytes) override {
    MakeCurrent(device_);
    absl::StatusOr<void*> p = allocator_.Allocate(bytes);
    if (!p.ok()) {
      if (p.status().code() == absl::StatusCode::kResourceExhausted) OutOfMemory(bytes);
      std::fprintf(stderr, "conveyor: allocating %lld bytes on CUDA device %d: %s\n",
                   static_cast<long long>(bytes), device_, p.status().ToString().c_str());
      std::exit(1);
    }
    return *p;
  }

  void Free(void* p, int64_t bytes) override {
    // No CUDA call: the block goes back to the cache. Work queued on the default stream
    // that still reads it finishes before any later user's work (same stream).
    const absl::Status s = allocator_.Free(p);
    if (!s.ok()) {
      std::fprintf(stderr, "conveyor: freeing a %lld-byte CUDA tensor: %s\n",
                   static_cast<long long>(bytes), s.ToString().c_str());
      std::abort();  // a programming error (double free), not a user's: keep the core
    }
  }

  // On the default stream, where the ops run too for now: the stream orders the fill
  // before any kernel that uses the tensor, and after the last user of a reused block.
  void Zero(void* p, int64_t bytes) override {
    MakeCurrent(device_);
    if (bytes > 0) CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, /*stream=*/0));
  }

  // cudaMemcpy runs on the default stream, after the kernels queued there. With the host it
  // returns only when the host side is done: CopyToHost's caller reads the bytes at once (a
  // loss, a checkpoint shard), and CopyFromHost's source may be a temporary that is freed or
  // refilled right after (a copy from pageable memory is staged, and the source is free to
  // reuse on return). A device-to-device copy may still be running when it returns, but it
  // is ordered before the kernels that later read its result on the same stream.
  void Copy(void* dst, const void* src, int64_t bytes) override {
    MakeCurrent(device_);
    CUDA_CHECK(cudaMemcpy(dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice));
  }
  void CopyFromHost(void* dst, const void* host_src, int64_t bytes) override {
    MakeCurrent(device_);
    CUDA_CHECK(cudaMemcpy(dst, host_src, static_cast<size_t>(bytes), cudaMemcpyHostToDevice));
  }
  void CopyToHost(void* host_dst, const void* src, int64_t bytes) override {
    MakeCurrent(device_);
    CUDA_CHECK(cudaMemcpy(host_dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost));
  }

  CachingAllocator& allocator() { return allocator_; }
  void EmptyCache() {
    MakeCurrent(device_);  // cudaFree on the device the segments came from
    allocator_.EmptyCache();
  }

 private:
  // DeviceMemory's contract: there is no useful way to go on without the buffer, so say
  // what filled the device and what would make the step fit, then exit.
  [[noreturn]] void OutOfMemory(int64_t bytes) {
    const AllocatorStats s = allocator_.stats();
    size_t free_bytes = 0;
    size_t total_bytes = 0;
    std::string device_line;
    if (const cudaError_t err = cudaMemGetInfo(&free_bytes, &total_bytes); err == cudaSuccess) {
      device_line = absl::StrCat(Bytes(static_cast<int64_t>(free_bytes)), " free of ",
                                 Bytes(static_cast<int64_t>(total_bytes)), " total");
    } else {
      cudaGetLastError();
      device_line =
          absl::StrCat("free/total unknown (cudaMemGetInfo: ", cudaGetErrorName(err), ")");
    }
    std::string categories;
    const MemoryTracker& tracker = MemoryTracker::Global();
    for (int i = 0; i < kNumMemoryCategories; ++i) {
      const auto category = static_cast<MemoryCategory>(i);
      absl::StrAppend(&categories, i == 0 ? "" : ", ", MemoryCategoryName(category), " ",
                      Bytes(tracker.live_bytes(category)));
    }
    std::fprintf(stderr,
                 "conveyor: CUDA out of memory on device %d: tried to allocate %s (%lld bytes).\n"
                 "  caching allocator: %s in use by tensors (peak %s), %s reserved from the device "
                 "(peak %s)\n"
                 "  live tensors by category (host and device): %s\n"
                 "  device %d: %s\n"
                 "  %s\n",
                 device_, Bytes(bytes).c_str(), static_cast<long long>(bytes),
                 Bytes(s.bytes_in_use).c_str(), Bytes(s.peak_bytes_in_use).c_str(),
                 Bytes(s.bytes_reserved).c_str(), Bytes(s.peak_bytes_reserved).c_str(),
                 categories.c_str(), device_, device_line.c_str(), kOutOfMemoryAdvice);
    std::exit(1);
  }

  const int device_;
  CudaBacking backing_;
  CachingAllocator allocator_;
};

std::atomic<CudaMemory*> installed{nullptr};

}  // namespace

DeviceMemory& InstallDeviceMemory() {
  // Never destroyed: tensors in static storage may be freed during exit, and by then the
  // CUDA runtime may be unloaded (cudaFree would fail); the driver frees it all at exit.
  static CudaMemory* const memory = [] {
    int device = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    auto* m = new CudaMemory(device);
    RegisterDeviceMemory(Device::kCuda, m);
    installed.store(m);
    return m;
  }();
  return *memory;
}

AllocatorStats DeviceMemoryStats() {
  CudaMemory* m = installed.load();
  return m == nullptr ? AllocatorStats() : m->allocator().stats();
}

void ResetDeviceMemoryPeaks() {
  if (CudaMemory* m = installed.load(); m != nullptr) m->allocator().ResetPeaks();
}

void EmptyDeviceCache() {
  if (CudaMemory* m = installed.load(); m != nullptr) m->EmptyCache();
}

}  // namespace conveyor::cuda
