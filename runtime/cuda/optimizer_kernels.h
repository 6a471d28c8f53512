// The optimizer's vector kernels besides AdamW (adamw_kernel.h): the sum of squares
// behind the gradient norm, clipping's scale, and SGD with momentum. Each enqueues on
// `stream` and returns the launch status.
#ifndef CONVEYOR_RUNTIME_CUDA_OPTIMIZER_KERNELS_H_
#define CONVEYOR_RUNTIME_CUDA_OPTIMIZER_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace conveyor {

// Blocks an array's sum of squares uses at most.
inline constexpr int kSumOfSquaresMaxBlocks = 1024;

// The blocks the sum of squares of n elements takes: one per 256, at most
// kSumOfSquaresMaxBlocks.
int SumOfSquaresBlocks(int64_t n);

// One array of a multi-array sum of squares, as the kernel reads it from device memory:
// it owns blocks [first_block, first_block + blocks), blocks = SumOfSquaresBlocks(n),
// first_block increasing along the table.
struct SquaresArray {
  const float* x;
  int64_t n;
  int64_t first_block;
  int blocks;
};

// partials[b] = the sum, over the elements block b visits of its array, of
// double(x[i])^2, for every block of the `count` arrays of the device-resident `table`
// (`blocks` in all), in one launch. An array's blocks stride over it as if launched
// alone, so its partials do not depend on the other arrays; the caller adds them in
// block order on the host (no atomics: the result does not depend on scheduling).
cudaError_t LaunchSumsOfSquares(const SquaresArray* table, int count, int64_t blocks,
                                double* partials, cudaStream_t stream = nullptr);

// *count += the number of i < n with x[i] == 0 (either sign), on the device.
cudaError_t LaunchCountZeros(const float* x, int64_t n, unsigned long long* count,
                             cudaStream_t stream = nullptr);

// x[i] = float(double(x[i]) * factor).
cudaError_t LaunchScale(double factor, float* x, int64_t n, cudaStream_t stream = nullptr);

// torch.optim.SGD per element: d = g + wd p; buf = first_step ? d : momentum buf + d;
// p -= lr buf.
cudaError_t LaunchSgdStep(float lr, float momentum, float weight_decay, bool first_step,
                          const float* grad, float* param, float* momentum_buf, int64_t n,
                          cudaStream_t stream = nullptr);

}  // namespace conveyor

#endif  // CONVEYOR_RUNTIME_CUDA_OPTIMIZER_KERNELS_H_
