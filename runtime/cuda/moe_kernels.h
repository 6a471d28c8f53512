// Mixture-of-experts token movement on the device (runtime/cpu/moe_tokens.h for the math):
// gathers only, so no two threads write one element and no atomics are needed; the
// combine sums each token's slots in slot order, as the CPU does. Index and weight arrays
// are device arrays (uploaded by CudaOps from the host's routing plan).
#ifndef CONVEYOR_RUNTIME_CUDA_MOE_KERNELS_H_
#define CONVEYOR_RUNTIME_CUDA_MOE_KERNELS_H_

#include <cstdint>

#include "runtime/dtype.h"

namespace conveyor::cuda {

// out[r, :] = row_weight[r] * x[token_of_row[r], :], or 0 where token_of_row[r] < 0;
// row_weight null means 1. x and out have `dtype`.
void LaunchPermuteTokens(DType dtype, const void* x, int64_t width, const int32_t* token_of_row,
                         const float* row_weight, int64_t rows, void* out);

// out[t, :] = sum_j slot_weight[t, j] * permuted[row_of_slot[t, j], :] over the slots
// with a row (>= 0), in j order with fp32 accumulation; slot_weight null means 1.
void LaunchUnpermuteTokens(DType dtype, const void* permuted, int64_t width,
                           const int32_t* row_of_slot, const float* slot_weight, int64_t tokens,
                           int64_t topk, void* out);

// out[t, j] = dy[t, :] . permuted[row_of_slot[t, j], :] (fp32), or 0 for a dropped slot.
void LaunchSlotDots(DType dtype, const void* dy, const void* permuted, int64_t width,
                    const int32_t* row_of_slot, int64_t tokens, int64_t topk, float* out);

}  // namespace conveyor::cuda

#endif  // CONVEYOR_RUNTIME_CUDA_MOE_KERNELS_H_
