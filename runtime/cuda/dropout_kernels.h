// Inverted dropout on the device with the CPU's mask (runtime/cpu/dropout.h): element i
// is kept when PhiloxUniform(key, first_index + i) >= p and then scaled by 1 / (1 - p).
#ifndef CONVEYOR_RUNTIME_CUDA_DROPOUT_KERNELS_H_
#define CONVEYOR_RUNTIME_CUDA_DROPOUT_KERNELS_H_

#include <cstdint>

#include "runtime/cuda/philox_uniform.h"
#include "runtime/dtype.h"

namespace conveyor::cuda {

// out = in * keep / (1 - p) over n elements; in == out is allowed; requires p > 0.
void LaunchDropout(DType dtype, PhiloxKey key, float p, uint64_t first_index, const void* in,
                   int64_t n, void* out);

// Bias-dropout-add in one pass over y [rows, width] (y and residual of `dtype`):
// y[r, c] = residual[r, c] + keep * (y[r, c] + bias[c]) / (1 - p), element r * width + c
// drawing index first_index + r * width + c. bias (of bias_dtype) may be null; p = 0
// keeps everything.
void LaunchBiasDropoutAdd(DType dtype, DType bias_dtype, const void* bias, PhiloxKey key, float p,
                          uint64_t first_index, const void* residual, int64_t rows, int64_t width,
                          void* y);

}  // namespace conveyor::cuda

#endif  // CONVEYOR_RUNTIME_CUDA_DROPOUT_KERNELS_H_
