#include <algorithm>

#include "runtime/cuda/block_table.h"
#include "runtime/cuda/optimizer_kernels.h"

namespace conveyor {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65535;

int64_t BlocksFor(int64_t n, int64_t cap) { return std::min((n + kThreads - 1) / kThreads, cap); }

// A sum of squares in double per block: the blocks of one array stride over it together
// (block j of its B visits j * 256 + thread, then every B * 256 elements); each block
// reduces its threads' sums in shared memory (a fixed tree, so the partial is
// deterministic) and writes one partial.
__global__ void SumsOfSquaresKernel(const SquaresArray* __restrict__ table, int count,
                                    double* __restrict__ partials) {
  __shared__ double sums[kThreads];
  const int64_t block = blockIdx.x;
  const SquaresArray& a = table[EntryOfBlock(table, count, block)];
  const int64_t local_block = block - a.first_block;
  const int64_t stride = static_cast<int64_t>(a.blocks) * blockDim.x;
  double sum = 0.0;
  for (int64_t i = local_block * blockDim.x + threadIdx.x; i < a.n; i += stride) {
    const double v = a.x[i];
    sum += v * v;
  }
  sums[threadIdx.x] = sum;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) sums[threadIdx.x] += sums[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) partials[blockIdx.x] = sums[0];
}

__global__ void CountZerosKernel(const float* __restrict__ x, int64_t n,
                                 unsigned long long* count) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  unsigned long long mine = 0;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    mine += x[i] == 0.0f ? 1 : 0;
  }
  if (mine > 0) atomicAdd(count, mine);  // a count: the order of additions does not matter
}

__global__ void ScaleKernel(double factor, float* __restrict__ x, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    x[i] = static_cast<float>(static_cast<double>(x[i]) * factor);
  }
}

// Built with -fmad=false: each fp32 operation rounds as in the CPU reference.
__global__ void SgdStepKernel(float lr, float momentum, float weight_decay, bool first_step,
                              const float* __restrict__ grad, float* __restrict__ param,
                              float* __restrict__ buf, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const float d = grad[i] + weight_decay * param[i];
    const float b = first_step ? d : momentum * buf[i] + d;
    buf[i] = b;
    param[i] -= lr * b;
  }
}

}  // namespace

int SumOfSquaresBlocks(int64_t n) { return static_cast<int>(BlocksFor(n, kSumOfSquaresMaxBlocks)); }

cudaError_t LaunchSumsOfSquares(const SquaresArray* table, int count, int64_t blocks,
                                double* partials, cudaStream_t stream) {
  if (count < 0 || blocks < 0) return cudaErrorInvalidValue;
  if (count == 0 || blocks == 0) return cudaSuccess;
  SumsOfSquaresKernel<<<static_cast<unsigned int>(blocks), kThreads, 0, stream>>>(table, count,
                                                                                  partials);
  return cudaGetLastError();
}

cudaError_t LaunchCountZeros(const float* x, int64_t n, unsigned long long* count,
                             cudaStream_t stream) {
  if (n < 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  CountZerosKernel<<<static_cast<unsigned int>(BlocksFor(n, kMaxBlocks)), kThreads, 0, stream>>>(
      x, n, count);
  return cudaGetLastError();
}

cudaError_t LaunchScale(double factor, float* x, int64_t n, cudaStream_t stream) {
  if (n < 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  ScaleKernel<<<static_cast<unsigned int>(BlocksFor(n, kMaxBlocks)), kThreads, 0, stream>>>(factor,
                                                                                            x, n);
  return cudaGetLastError();
}

cudaError_t LaunchSgdStep(float lr, float momentum, float weight_decay, bool first_step,
                          const float* grad, float* param, float* momentum_buf, int64_t n,
                          cudaStream_t stream) {
  if (n < 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  SgdStepKernel<<<static_cast<unsigned int>(BlocksFor(n, kMaxBlocks)), kThreads, 0, stream>>>(
      lr, momentum, weight_decay, first_step, grad, param, momentum_buf, n);
  return cudaGetLastError();
}

}  // namespace conveyor
