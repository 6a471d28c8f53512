#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/device_math.h"
#include "runtime/cuda/moe_kernels.h"

namespace conveyor::cuda {
namespace {

// One block per permuted row (grid-strided), threads over its columns.
template <typename T>
__global__ void PermuteKernel(const T* __restrict__ x, int64_t width,
                              const int32_t* __restrict__ token_of_row,
                              const float* __restrict__ row_weight, int64_t rows,
                              T* __restrict__ out) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int32_t token = token_of_row[r];
    const float w = row_weight != nullptr ? row_weight[r] : 1.0f;
    T* o = out + r * width;
    for (int64_t c = threadIdx.x; c < width; c += blockDim.x) {
      Store(&o[c], token < 0 ? 0.0f : w * Load(&x[static_cast<int64_t>(token) * width + c]));
    }
  }
}

// One block per token, threads over columns, the token's slots summed in order.
template <typename T>
__global__ void UnpermuteKernel(const T* __restrict__ permuted, int64_t width,
                                const int32_t* __restrict__ row_of_slot,
                                const float* __restrict__ slot_weight, int64_t tokens, int64_t topk,
                                T* __restrict__ out) {
  for (int64_t t = blockIdx.x; t < tokens; t += gridDim.x) {
    for (int64_t c = threadIdx.x; c < width; c += blockDim.x) {
      float acc = 0.0f;
      for (int64_t j = 0; j < topk; ++j) {
        const int32_t row = row_of_slot[t * topk + j];
        if (row < 0) continue;
        const float w = slot_weight != nullptr ? slot_weight[t * topk + j] : 1.0f;
        acc += w * Load(&permuted[static_cast<int64_t>(row) * width + c]);
      }
      Store(&out[t * width + c], acc);
    }
  }
}

// One block per slot: a block-wide sum of the products.
template <typename T>
__global__ void SlotDotsKernel(const T* __restrict__ dy, const T* __restrict__ permuted,
                               int64_t width, const int32_t* __restrict__ row_of_slot,
                               int64_t tokens, int64_t topk, float* __restrict__ out) {
  for (int64_t s = blockIdx.x; s < tokens * topk; s += gridDim.x) {
    const int32_t row = row_of_slot[s];
    float partial = 0.0f;
    if (row >= 0) {
      const T* a = dy + (s / topk) * width;
      const T* b = permuted + static_cast<int64_t>(row) * width;
      for (int64_t c = threadIdx.x; c < width; c += blockDim.x) {
        partial += Load(&a[c]) * Load(&b[c]);
      }
    }
    const float sum = BlockSum(partial);
    if (threadIdx.x == 0) out[s] = sum;
  }
}

}  // namespace

void LaunchPermuteTokens(DType dtype, const void* x, int64_t width, const int32_t* token_of_row,
                         const float* row_weight, int64_t rows, void* out) {
  if (rows <= 0 || width <= 0) return;
  Dispatch(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    PermuteKernel<<<RowLoopBlocks(rows), RowThreads(width)>>>(
        static_cast<const T*>(x), width, token_of_row, row_weight, rows, static_cast<T*>(out));
  });
  CUDA_CHECK_LAUNCH("PermuteKernel");
}

void LaunchUnpermuteTokens(DType dtype, const void* permuted, int64_t width,
                           const int32_t* row_of_slot, const float* slot_weight, int64_t tokens,
                           int64_t topk, void* out) {
  if (tokens <= 0 || width <= 0) return;
  Dispatch(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    UnpermuteKernel<<<RowLoopBlocks(tokens), RowThreads(width)>>>(
        static_cast<const T*>(permuted), width, row_of_slot, slot_weight, tokens, topk,
        static_cast<T*>(out));
  });
  CUDA_CHECK_LAUNCH("UnpermuteKernel");
}

void LaunchSlotDots(DType dtype, const void* dy, const void* permuted, int64_t width,
                    const int32_t* row_of_slot, int64_t tokens, int64_t topk, float* out) {
  if (tokens <= 0 || topk <= 0) return;
  Dispatch(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    SlotDotsKernel<<<RowLoopBlocks(tokens * topk), RowThreads(width)>>>(
        static_cast<const T*>(dy), static_cast<const T*>(permuted), width, row_of_slot, tokens,
        topk, out);
  });
  CUDA_CHECK_LAUNCH("SlotDotsKernel");
}

}  // namespace conveyor::cuda
