#include "runtime/cuda/device_math.h"
#include "runtime/cuda/dropout_kernels.h"

namespace conveyor::cuda {
namespace {

// out[i] = uniform(first_index + i) >= p ? in[i] * scale : 0,  scale = 1 / (1 - p)
// (scale computed once on the host in fp32, as the CPU does). No __restrict__: in may
// alias out, and each element is read before it is written by the same thread.
template <typename T>
__global__ void DropoutKernel(PhiloxKey key, float p, float scale, uint64_t first_index,
                              const T* in, int64_t n, T* out) {
  CONVEYOR_GRID_STRIDE(i, n) {
    const bool keep = DropoutKeeps(key, first_index + static_cast<uint64_t>(i), p);
    Store(&out[i], keep ? Load(&in[i]) * scale : 0.0f);
  }
}

}  // namespace

void LaunchDropout(DType dtype, PhiloxKey key, float p, uint64_t first_index, const void* in,
                   int64_t n, void* out) {
  if (n <= 0) return;
  const float scale = 1.0f / (1.0f - p);
  Dispatch(dtype, [&](auto t) {
    using T = typename decltype(t)::type;
    DropoutKernel<<<ElementwiseBlocks(n), kThreads>>>(
        key, p, scale, first_index, static_cast<const T*>(in), n, static_cast<T*>(out));
  });
  CUDA_CHECK_LAUNCH("DropoutKernel");
}

}  // namespace conveyor::cuda
