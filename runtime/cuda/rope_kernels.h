// Rotary position embedding of the query and key heads of a fused QKV matrix, on the
// device, with the math of runtime/cpu/rope.h.
#ifndef CONVEYOR_RUNTIME_CUDA_ROPE_KERNELS_H_
#define CONVEYOR_RUNTIME_CUDA_ROPE_KERNELS_H_

#include <cstdint>

#include "runtime/dtype.h"
#include "runtime/op_params.h"

namespace conveyor::cuda {

// qkv [tokens, shape.qkv_width()] in place; token t sits at position positions[t] (device
// int32 [tokens]). cos / sin: device [positions, half] tables (the first 2 * half entries
// of each head rotate).
void LaunchRotateQueriesAndKeys(DType dtype, const float* cos, const float* sin, int64_t half,
                                const AttentionShape& shape, const int32_t* positions,
                                bool inverse, int64_t tokens, void* qkv);

}  // namespace conveyor::cuda

#endif  // CONVEYOR_RUNTIME_CUDA_ROPE_KERNELS_H_
