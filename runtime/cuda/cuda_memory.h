// GPU memory for tensors: the caching allocator (runtime/caching_allocator.h) over
// cudaMalloc/cudaFree, installed as MemoryOf(Device::kCuda). After the first training
// iteration has filled its cache, allocating and freeing tensors makes no CUDA call but the
// zero-fill, so the steady state never pays for cudaMalloc or cudaFree's device-wide sync.
#ifndef CONVEYOR_RUNTIME_CUDA_CUDA_MEMORY_H_
#define CONVEYOR_RUNTIME_CUDA_CUDA_MEMORY_H_

#include "runtime/caching_allocator.h"
#include "runtime/device_memory.h"

namespace conveyor::cuda {

// Creates the CUDA memory on the first call and registers it for Device::kCuda; every call
// returns the same one (thread-safe). It serves the device current on the calling thread at
// that first call, whatever thread later allocates or frees: call cudaSetDevice(local rank)
// first, and only once a device is known to be usable (ProbeGpus().count > 0), since a CUDA
// error here ends the process with a message.
//
// Out of memory ends the process with a message naming the request, what the allocator holds,
// the device's free and total memory, and the flags that make a step need less.
DeviceMemory& InstallDeviceMemory();

// The caching allocator's counters; all zero before InstallDeviceMemory. Tests and benchmarks
// show "no cudaMalloc in the steady state" with num_backing_allocations.
AllocatorStats DeviceMemoryStats();
// Restarts the peaks (e.g. after the first iteration, to measure the steady state).
void ResetDeviceMemoryPeaks();
// Returns every cached segment with no tensor in it to the device (cudaFree), e.g. to leave
// room for a library that allocates with cudaMalloc itself.
void EmptyDeviceCache();

}  // namespace conveyor::cuda

#endif  // CONVEYOR_RUNTIME_CUDA_CUDA_MEMORY_H_
