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

// y[r, c] = residual[r, c] + (keep ? (y[r, c] + bias[c]) * scale : 0), one block-stride
// row loop per block (the column needs no 64-bit division). The products and sums are
// rounded separately (__fmul_rn, __fadd_rn), in the order of the composition AddBias,
// Dropout, Add, so that in fp32 the result is that composition's bit for bit.
template <typename T, typename W>
__global__ void BiasDropoutAddKernel(const W* __restrict__ bias, PhiloxKey key, float p,
                                     float scale, uint64_t first_index,
                                     const T* __restrict__ residual, int64_t rows, int64_t width,
                                     T* __restrict__ y) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    for (int64_t c = threadIdx.x; c < width; c += blockDim.x) {
      const int64_t i = r * width + c;
      float v = Load(&y[i]);
      if (bias != nullptr) v = __fadd_rn(v, Load(&bias[c]));
      if (p > 0.0f) {
        v = DropoutKeeps(key, first_index + static_cast<uint64_t>(i), p) ? __fmul_rn(v, scale)
                                                                         : 0.0f;
      }
      Store(&y[i], __fadd_rn(Load(&residual[i]), v));
    }
  }
}

}  // namespace

void LaunchBiasDropoutAdd(DType dtype, DType bias_dtype, const void* bias, PhiloxKey key, float p,
                          uint64_t first_index, const void* residual, int64_t rows, int64_t width,
                          void* y) {
  if (rows <= 0 || width <= 0) return;
  const float scale = p > 0.0f ? 1.0f / (1.0f - p) : 1.0f;
  Dispatch2(dtype, bias_dtype, [&](auto t, auto w) {
    using T = typename decltype(t)::type;
    using W = typename decltype(w)::type;
    BiasDropoutAddKernel<<<RowLoopBlocks(rows), RowThreads(width)>>>(
        static_cast<const W*>(bias), key, p, scale, first_index, static_cast<const T*>(residual),
        rows, width, static_cast<T*>(y));
  });
  CUDA_CHECK_LAUNCH("BiasDropoutAddKernel");
}

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
