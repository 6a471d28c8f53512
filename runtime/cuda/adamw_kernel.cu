#include <algorithm>
#include <cstdint>

#include "runtime/cuda/adamw_kernel.h"
#include "runtime/cuda/block_table.h"

namespace conveyor {
namespace {

constexpr int kThreads = 256;
// Enough blocks to fill any current GPU several times over; the grid-stride loop
// covers the rest.
constexpr int64_t kMaxBlocks = 65535;

__device__ __forceinline__ float Lerp(float start, float end, float weight) {
  // PyTorch's lerp, as TorchLerp in runtime/cpu/adamw.h.
  return (weight < 0.5f && weight > -0.5f) ? start + weight * (end - start)
                                           : end - (end - start) * (1.0f - weight);
}

// Element i, in torch.optim.AdamW's order (see runtime/cpu/adamw.h), g the gradient times
// s.grad_scale in double, rounded:
//   p  = p * (1 - lr wd)
//   m  = lerp(m, g, 1 - b1)
//   v  = v b2 + (1 - b2) g g
//   p -= (lr / (1 - b1^t)) * (m / (sqrt(v) / sqrt(1 - b2^t) + eps))
// Compiled with -fmad=false and IEEE div/sqrt so every operation rounds exactly like
// the CPU reference.
__device__ __forceinline__ void AdamWElement(const AdamWScalars& s, float decay_factor,
                                             const float* __restrict__ grad,
                                             float* __restrict__ param, float* __restrict__ exp_avg,
                                             float* __restrict__ exp_avg_sq, int64_t i) {
  const float g = static_cast<float>(static_cast<double>(grad[i]) * s.grad_scale);
  const float p = param[i] * decay_factor;
  const float m = Lerp(exp_avg[i], g, s.one_minus_beta1);
  const float v = exp_avg_sq[i] * s.beta2 + s.one_minus_beta2 * g * g;
  const float denom = sqrtf(v) / s.bias_correction2_sqrt + s.eps;
  param[i] = p - s.step_size * (m / denom);
  exp_avg[i] = m;
  exp_avg_sq[i] = v;
}

__global__ void AdamWStepKernel(AdamWScalars s, const float* __restrict__ grad,
                                float* __restrict__ param, float* __restrict__ exp_avg,
                                float* __restrict__ exp_avg_sq, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    AdamWElement(s, s.decay_factor, grad, param, exp_avg, exp_avg_sq, i);
  }
}

// Multi-tensor apply: block b updates chunk b - first_block of the tensor whose blocks
// it falls in (block_table.h), kAdamWChunk elements, one per thread and pass. One launch
// for the whole model instead of one per parameter.
__global__ void AdamWTensorsKernel(AdamWScalars s, const AdamWDeviceTensor* __restrict__ table,
                                   int count) {
  const int64_t block = blockIdx.x;
  const AdamWDeviceTensor& t = table[EntryOfBlock(table, count, block)];
  const int64_t begin = (block - t.first_block) * kAdamWChunk;
  const int64_t end = min(begin + kAdamWChunk, t.n);
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    AdamWElement(s, t.decay_factor, t.grad, t.param, t.exp_avg, t.exp_avg_sq, i);
  }
}

}  // namespace

cudaError_t LaunchAdamWTensors(const AdamWHyperParams& hp, const AdamWDeviceTensor* table,
                               int count, int64_t blocks, cudaStream_t stream) {
  if (count < 0 || blocks < 0) return cudaErrorInvalidValue;
  if (count == 0 || blocks == 0) return cudaSuccess;
  AdamWTensorsKernel<<<static_cast<unsigned int>(blocks), kThreads, 0, stream>>>(
      ComputeAdamWScalars(hp), table, count);
  return cudaGetLastError();
}

cudaError_t LaunchAdamWStep(const AdamWHyperParams& hp, const float* grad, float* param,
                            float* exp_avg, float* exp_avg_sq, int64_t n, cudaStream_t stream) {
  if (n < 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;  // A zero-block launch would be an error.
  if (grad == nullptr || param == nullptr || exp_avg == nullptr || exp_avg_sq == nullptr) {
    return cudaErrorInvalidValue;
  }
  const int64_t blocks = std::min<int64_t>((n + kThreads - 1) / kThreads, kMaxBlocks);
  AdamWStepKernel<<<static_cast<unsigned int>(blocks), kThreads, 0, stream>>>(
      ComputeAdamWScalars(hp), grad, param, exp_avg, exp_avg_sq, n);
  return cudaGetLastError();
}

}  // namespace conveyor
