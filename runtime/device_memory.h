// Where a tensor's bytes live, and the memory behind each place.
//
// The host memory is built in. The CUDA backend registers its caching allocator for
// Device::kCuda when it starts, so that Tensor (and everything above the runtime)
// allocates, zeroes and copies device memory without calling CUDA itself.
#ifndef CONVEYOR_RUNTIME_DEVICE_MEMORY_H_
#define CONVEYOR_RUNTIME_DEVICE_MEMORY_H_

#include <cstdint>

#include "absl/strings/string_view.h"

namespace conveyor {

// What a user can change when a step does not fit: the end of every out-of-memory message.
inline constexpr char kOutOfMemoryAdvice[] =
    "--dry-run predicts the memory each rank needs. To fit, lower --micro-batch-size or "
    "--seq-length, recompute activations (--recompute-granularity full or selective), shard "
    "the optimizer (--use-distributed-optimizer), or split the model over more ranks "
    "(--tensor-model-parallel-size, --pipeline-model-parallel-size).";

enum class Device { kCpu, kCuda };

absl::string_view DeviceName(Device device);

class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;

  // `bytes` bytes, aligned for vector loads, of undefined contents: for a buffer its
  // first writer fills whole (an op's output), where zero-filling would only cost a pass
  // over memory. Running out of memory ends the process with a message naming the
  // request and what is held (there is no useful way to continue a training step without
  // the buffer).
  virtual void* Allocate(int64_t bytes) = 0;
  // As Allocate, zero-filled.
  virtual void* AllocateZeroed(int64_t bytes) {
    void* p = Allocate(bytes);
    Zero(p, bytes);
    return p;
  }
  virtual void Free(void* p, int64_t bytes) = 0;

  virtual void Zero(void* p, int64_t bytes) = 0;
  // Copies within this device, and between it and the host.
  virtual void Copy(void* dst, const void* src, int64_t bytes) = 0;
  virtual void CopyFromHost(void* dst, const void* host_src, int64_t bytes) = 0;
  virtual void CopyToHost(void* host_dst, const void* src, int64_t bytes) = 0;
};

// The memory of `device`; Device::kCuda must have been registered.
DeviceMemory& MemoryOf(Device device);

// Whether the host's Allocate fills its bytes with 0xff (NaN in fp32 and bf16), so that a
// result that reads an element nobody wrote shows as NaN. On by default, as every test
// runs; the trainer's main turns it off unless CONVEYOR_POISON_HOST_MEMORY=1, since the
// fill is a pass over every buffer a step allocates (330 MB a step on
// tools/bench_cpu.sh's model, about 5% of its time). On the GPU nothing is filled.
void SetHostMemoryPoison(bool on);

// Installs `memory` (not owned, must outlive every tensor on the device) for `device`.
// The host's may be replaced too, by a memory that forwards to the one it replaces (a
// test that watches which buffers are tensors): tensors made before keep working.
void RegisterDeviceMemory(Device device, DeviceMemory* memory);

}  // namespace conveyor

#endif  // CONVEYOR_RUNTIME_DEVICE_MEMORY_H_
