// fp32 <-> bf16 conversion kernels: the device twins of ToBFloat16 / ToFloat in
// runtime/dtype.h, bit for bit (including the NaN rule), so that casting master
// weights to bf16 gives the same bits on either backend.
#ifndef CONVEYOR_RUNTIME_CUDA_CAST_KERNELS_H_
#define CONVEYOR_RUNTIME_CUDA_CAST_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "runtime/dtype.h"

namespace conveyor {

// out[i] = ToBFloat16(in[i]) for i < n, on device memory, enqueued on `stream`.
cudaError_t LaunchFloatToBFloat16(const float* in, BFloat16* out, int64_t n,
                                  cudaStream_t stream = nullptr);

// out[i] = ToFloat(in[i]) for i < n (exact: bf16 is a truncated fp32).
cudaError_t LaunchBFloat16ToFloat(const BFloat16* in, float* out, int64_t n,
                                  cudaStream_t stream = nullptr);

}  // namespace conveyor

#endif  // CONVEYOR_RUNTIME_CUDA_CAST_KERNELS_H_
