// The MLP activations of the CUDA backend, fused forward and backward kernels with the
// math of runtime/cpu/activation.cc (fp32 inside, one rounding per stored element).
#ifndef CONVEYOR_RUNTIME_CUDA_ACTIVATION_KERNELS_H_
#define CONVEYOR_RUNTIME_CUDA_ACTIVATION_KERNELS_H_

#include <cstdint>

#include "runtime/dtype.h"

namespace conveyor::cuda {

// y = gelu_tanh(x) over n elements; dx = dy * gelu_tanh'(x).
void LaunchGeluForward(DType dtype, const void* x, int64_t n, void* y);
void LaunchGeluBackward(DType dtype, const void* x, const void* dy, int64_t n, void* dx);

// x [rows, 2 * width] = (gate a | up b); y [rows, width] = silu(a) * b; dx of x's shape.
void LaunchSwigluForward(DType dtype, const void* x, int64_t rows, int64_t width, void* y);
void LaunchSwigluBackward(DType dtype, const void* x, const void* dy, int64_t rows, int64_t width,
                          void* dx);

// y = max(x, 0)^2 over n elements; dx = 2 max(x, 0) dy.
void LaunchSquaredReluForward(DType dtype, const void* x, int64_t n, void* y);
void LaunchSquaredReluBackward(DType dtype, const void* x, const void* dy, int64_t n, void* dx);

}  // namespace conveyor::cuda

#endif  // CONVEYOR_RUNTIME_CUDA_ACTIVATION_KERNELS_H_
