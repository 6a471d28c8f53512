// CUDA_CHECK: the CUDA backend's contract for failed CUDA calls, for now. A failed call
// (an illegal address, a bad launch, out of memory) leaves the device in a state a
// training step cannot recover from, so the process prints the call, where it was made
// and the runtime's name and description of the error, then exits with status 1.
// Header-only so that nvcc (.cu) and gcc (.cc) translation units share it.
#ifndef CONVEYOR_RUNTIME_CUDA_CUDA_CHECK_H_
#define CONVEYOR_RUNTIME_CUDA_CUDA_CHECK_H_

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>

namespace conveyor::cuda {

[[noreturn]] inline void CudaFailure(const char* call, cudaError_t err, const char* file,
                                     int line) {
  std::fprintf(stderr, "conveyor: CUDA call failed at %s:%d: %s\n  -> %s: %s\n", file, line, call,
               cudaGetErrorName(err), cudaGetErrorString(err));
  std::fflush(stderr);
  std::exit(1);
}

// Ends the process with `message` (a misuse of the backend that no caller can handle,
// e.g. a tensor of the wrong dtype reaching an op).
[[noreturn]] inline void Fatal(const char* op, const char* message) {
  std::fprintf(stderr, "conveyor: CudaOps::%s: %s\n", op, message);
  std::fflush(stderr);
  std::exit(1);
}

}  // namespace conveyor::cuda

#define CUDA_CHECK(expr)                                                            \
  do {                                                                              \
    const cudaError_t conveyor_cuda_err_ = (expr);                                  \
    if (conveyor_cuda_err_ != cudaSuccess) {                                        \
      ::conveyor::cuda::CudaFailure(#expr, conveyor_cuda_err_, __FILE__, __LINE__); \
    }                                                                               \
  } while (0)

// After a kernel launch (`kernel_name` a string literal): reports a bad configuration
// (grid, shared memory) at once. Errors raised while the kernel runs surface at the next
// synchronising call, or at once with CudaOps' synchronize_each_op.
#define CUDA_CHECK_LAUNCH(kernel_name)                                                      \
  do {                                                                                      \
    const cudaError_t conveyor_cuda_err_ = cudaGetLastError();                              \
    if (conveyor_cuda_err_ != cudaSuccess) {                                                \
      ::conveyor::cuda::CudaFailure("launch of " kernel_name, conveyor_cuda_err_, __FILE__, \
                                    __LINE__);                                              \
    }                                                                                       \
  } while (0)

#endif  // CONVEYOR_RUNTIME_CUDA_CUDA_CHECK_H_
