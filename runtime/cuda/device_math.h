// Device helpers shared by the op kernels (nvcc only): element types, fp32 loads and
// stores of fp32/bf16 elements, warp and block reductions, dtype dispatch, launch sizes.
//
// Every kernel reads its inputs as fp32, computes in fp32 (fp64 where a CPU reference
// sums in double over long rows), and rounds once when it stores a bf16 result.
#ifndef CONVEYOR_RUNTIME_CUDA_DEVICE_MATH_H_
#define CONVEYOR_RUNTIME_CUDA_DEVICE_MATH_H_

#if !defined(__CUDACC__)
#error "device_math.h is for .cu files"
#endif

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "runtime/cuda/column_sum_plan.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/dtype.h"

namespace conveyor::cuda {

using bf16 = __nv_bfloat16;

__device__ __forceinline__ float Load(const float* p) { return *p; }
__device__ __forceinline__ float Load(const bf16* p) { return __bfloat162float(*p); }

__device__ __forceinline__ void Store(float* p, float v) { *p = v; }
// Round to nearest even, like ToBFloat16 on the host (NaN payloads may differ).
__device__ __forceinline__ void Store(bf16* p, float v) { *p = __float2bfloat16_rn(v); }

// Carries a type through a generic lambda: Dispatch(dtype, [&](auto t) {
//   using T = typename decltype(t)::type; ... })
template <typename T>
struct TypeTag {
  using type = T;
};

template <typename F>
void Dispatch(DType dtype, F&& f) {
  if (dtype == DType::kFloat32) {
    f(TypeTag<float>{});
  } else {
    f(TypeTag<bf16>{});
  }
}

// Two element types at once (an activation and a weight, which may differ).
template <typename F>
void Dispatch2(DType first, DType second, F&& f) {
  Dispatch(first, [&](auto a) { Dispatch(second, [&](auto b) { f(a, b); }); });
}

struct SumOp {
  template <typename R>
  __device__ __forceinline__ R operator()(R a, R b) const {
    return a + b;
  }
};

// max that propagates NaN, so a NaN logit shows as a NaN loss rather than vanishing.
struct MaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const {
    return (a > b || a != a) ? a : b;
  }
};

template <typename R, typename Op>
__device__ __forceinline__ R WarpAllReduce(R v, Op op) {
  for (int offset = 16; offset > 0; offset >>= 1)
    v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Reduces v over the whole block and returns the result to every thread. blockDim.x
// must be a multiple of 32 (at most 1024) and every thread must call it. The warp
// partials are combined in a fixed order, so the result is deterministic.
template <typename R, typename Op>
__device__ R BlockAllReduce(R v, Op op) {
  __shared__ R partial[32];
  v = WarpAllReduce(v, op);
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  __syncthreads();  // an earlier call's readers are done with `partial`
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  R total = partial[0];
  for (int w = 1; w < static_cast<int>(blockDim.x >> 5); ++w) total = op(total, partial[w]);
  return total;
}

template <typename R>
__device__ __forceinline__ R BlockSum(R v) {
  return BlockAllReduce(v, SumOp{});
}

// The attention kernels give a lane the head dimensions lane, lane + 32, ...: calls
// f(std::integral_constant<int, head_dim / 32 rounded up to a power of two>).
template <typename F>
void DispatchDimsPerLane(int64_t head_dim, F&& f) {
  if (head_dim <= 32) {
    f(std::integral_constant<int, 1>{});
  } else if (head_dim <= 64) {
    f(std::integral_constant<int, 2>{});
  } else if (head_dim <= 128) {
    f(std::integral_constant<int, 4>{});
  } else {
    f(std::integral_constant<int, 8>{});
  }
}

inline constexpr int kThreads = 256;
// Enough blocks to fill an H200 many times over; grid-stride loops cover the rest.
inline constexpr int64_t kMaxBlocks = 65535 * 8;

inline unsigned int ElementwiseBlocks(int64_t n) {
  return static_cast<unsigned int>(
      std::max<int64_t>(1, std::min<int64_t>((n + kThreads - 1) / kThreads, kMaxBlocks)));
}

// Blocks for a kernel whose blocks stride over rows (threads over a row's columns).
inline unsigned int RowLoopBlocks(int64_t rows) {
  return static_cast<unsigned int>(std::max<int64_t>(1, std::min<int64_t>(rows, kMaxBlocks)));
}

// Threads for a one-block-per-row kernel over rows of `width`: a multiple of 32, about
// four elements per thread, at most `max_threads`.
inline int RowThreads(int64_t width, int max_threads = 512) {
  const int64_t want = (width + 3) / 4;
  const int64_t rounded = (want + 31) / 32 * 32;
  return static_cast<int>(std::min<int64_t>(std::max<int64_t>(rounded, 32), max_threads));
}

// Grid x may be up to 2^31 - 1 blocks; a row count beyond that is far past any memory.
inline unsigned int RowBlocks(int64_t rows) { return static_cast<unsigned int>(rows); }

// A grid-stride loop index over [0, n).
#define CONVEYOR_GRID_STRIDE(i, n)                                                       \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

// Column sums along a ColumnSumPlan (column_sum_plan.h). Block (32, kColumnRowThreads) at
// grid (x, y) covers columns 32 x .. 32 x + 31 and chunk y's rows: thread (tx, ty) adds
// rows ty, ty + kColumnRowThreads, ... of the chunk in order, then the row threads' sums
// are added in order of ty. value(r, c) gives the two addends of row r, column c (e.g.
// dgamma's and dbeta's). One chunk adds its totals into first (and second, when not
// null); several store them in partials[chunk, width] for FinishColumnSum.
inline constexpr int kColumnRowThreads = 16;

template <typename F>
__device__ void ColumnSum(int64_t rows, int64_t rows_per_chunk, int64_t width, F value,
                          float2* partials, float* first, float* second) {
  __shared__ float2 partial[kColumnRowThreads][33];  // 33: no bank conflicts
  const int64_t c = static_cast<int64_t>(blockIdx.x) * 32 + threadIdx.x;
  const int64_t begin = static_cast<int64_t>(blockIdx.y) * rows_per_chunk;
  const int64_t end = begin + rows_per_chunk < rows ? begin + rows_per_chunk : rows;
  float2 s = make_float2(0.0f, 0.0f);
  if (c < width) {
    for (int64_t r = begin + threadIdx.y; r < end; r += kColumnRowThreads) {
      const float2 v = value(r, c);
      s.x += v.x;
      s.y += v.y;
    }
  }
  partial[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y != 0 || c >= width) return;
  float2 total = make_float2(0.0f, 0.0f);
  for (int y = 0; y < kColumnRowThreads; ++y) {
    total.x += partial[y][threadIdx.x].x;
    total.y += partial[y][threadIdx.x].y;
  }
  if (gridDim.y == 1) {
    first[c] += total.x;
    if (second != nullptr) second[c] += total.y;
  } else {
    partials[static_cast<int64_t>(blockIdx.y) * width + c] = total;
  }
}

inline dim3 ColumnSumBlock() { return dim3(32, kColumnRowThreads); }
inline dim3 ColumnSumGrid(const ColumnSumPlan& plan) {
  return dim3(static_cast<unsigned int>(plan.column_blocks),
              static_cast<unsigned int>(plan.chunks));
}

// first[c] += the sum over chunks k, in order, of partials[k, c].x; second likewise with .y.
// (A template only so that every .cu including this header may instantiate it.)
template <typename Pair>
__global__ void AddColumnPartialsKernel(const Pair* __restrict__ partials, int64_t chunks,
                                        int64_t width, float* __restrict__ first,
                                        float* __restrict__ second) {
  CONVEYOR_GRID_STRIDE(c, width) {
    float x = 0.0f;
    float y = 0.0f;
    for (int64_t k = 0; k < chunks; ++k) {
      const Pair p = partials[k * width + c];
      x += p.x;
      y += p.y;
    }
    first[c] += x;
    if (second != nullptr) second[c] += y;
  }
}

// The second pass of a ColumnSum over several chunks (nothing for one).
inline void FinishColumnSum(const ColumnSumPlan& plan, int64_t width, const float2* partials,
                            float* first, float* second) {
  if (plan.chunks == 1) return;
  AddColumnPartialsKernel<<<ElementwiseBlocks(width), kThreads>>>(partials, plan.chunks, width,
                                                                  first, second);
  CUDA_CHECK_LAUNCH("AddColumnPartialsKernel");
}

}  // namespace conveyor::cuda

#endif  // CONVEYOR_RUNTIME_CUDA_DEVICE_MATH_H_
