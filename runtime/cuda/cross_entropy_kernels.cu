#include <cmath>

#include "runtime/cuda/cross_entropy_kernels.h"
#include "runtime/cuda/device_math.h"

namespace conveyor::cuda {
namespace {

constexpr int kRowThreads = 512;  // vocabularies are long: 50k / 512 ~ 100 per thread

unsigned int LoopBlocks(int64_t rows) {
  return static_cast<unsigned int>(std::max<int64_t>(1, std::min<int64_t>(rows, kMaxBlocks)));
}

// row_max[r] = max_v z[r, v], NaN-propagating (a NaN logit must give a NaN loss).
template <typename T>
__global__ void RowMaxKernel(const T* __restrict__ logits, int64_t rows, int64_t vocab,
                             float* __restrict__ row_max) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* z = logits + r * vocab;
    float m = -INFINITY;
    for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x) m = MaxOp{}(m, Load(&z[v]));
    m = BlockAllReduce(m, MaxOp{});
    if (threadIdx.x == 0) row_max[r] = m;
  }
}

// sum_exp[r] = sum_v exp(z[r, v] - m[r]) with each exp in fp32 and the sum in fp64;
// target[r] = z[r, labels[r] - vocab_start] if in [0, vocab) else 0.
template <typename T>
__global__ void SumExpAndTargetKernel(const T* __restrict__ logits,
                                      const int32_t* __restrict__ labels, int64_t rows,
                                      int64_t vocab, int64_t vocab_start,
                                      const float* __restrict__ row_max,
                                      double* __restrict__ sum_exp, double* __restrict__ target) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* z = logits + r * vocab;
    const float m = row_max[r];
    double sum = 0.0;
    for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x) sum += expf(Load(&z[v]) - m);
    sum = BlockSum(sum);
    if (threadIdx.x == 0) {
      sum_exp[r] = sum;
      const int64_t local = static_cast<int64_t>(labels[r]) - vocab_start;
      target[r] = (local >= 0 && local < vocab) ? static_cast<double>(Load(&z[local])) : 0.0;
    }
  }
}

// dz[r, v] = s softmax(z)[r, v] - s onehot(label)[v],  softmax = exp(z - lse[r]),
// s = scale * loss_mask[r] (1 without a mask), written over z in place (rounded once
// to the logits' dtype).
template <typename T>
__global__ void CrossEntropyBackwardKernel(const int32_t* __restrict__ labels,
                                           const float* __restrict__ logsumexp,
                                           const float* __restrict__ loss_mask, int64_t rows,
                                           int64_t vocab, int64_t vocab_start, float scale,
                                           T* __restrict__ logits) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    T* z = logits + r * vocab;
    const float lse = logsumexp[r];
    const float s = loss_mask != nullptr ? scale * loss_mask[r] : scale;
    const int64_t local = static_cast<int64_t>(labels[r]) - vocab_start;
    for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x) {
      float g = s * expf(Load(&z[v]) - lse);
      if (v == local) g -= s;
      Store(&z[v], g);
    }
  }
}

}  // namespace

void LaunchRowMax(DType dtype, const void* logits, int64_t rows, int64_t vocab, float* row_max) {
  if (rows <= 0) return;
  Dispatch(dtype, [&](auto t) {
    using T = typename decltype(t)::type;
    RowMaxKernel<<<LoopBlocks(rows), kRowThreads>>>(static_cast<const T*>(logits), rows, vocab,
                                                    row_max);
  });
  CUDA_CHECK_LAUNCH("RowMaxKernel");
}

void LaunchSumExpAndTarget(DType dtype, const void* logits, const int32_t* labels, int64_t rows,
                           int64_t vocab, int64_t vocab_start, const float* row_max,
                           double* sum_exp, double* target) {
  if (rows <= 0) return;
  Dispatch(dtype, [&](auto t) {
    using T = typename decltype(t)::type;
    SumExpAndTargetKernel<<<LoopBlocks(rows), kRowThreads>>>(
        static_cast<const T*>(logits), labels, rows, vocab, vocab_start, row_max, sum_exp, target);
  });
  CUDA_CHECK_LAUNCH("SumExpAndTargetKernel");
}

void LaunchCrossEntropyBackward(DType dtype, const int32_t* labels, const float* logsumexp,
                                const float* loss_mask, int64_t rows, int64_t vocab,
                                int64_t vocab_start, float scale, void* logits) {
  if (rows <= 0 || vocab <= 0) return;
  Dispatch(dtype, [&](auto t) {
    using T = typename decltype(t)::type;
    CrossEntropyBackwardKernel<<<LoopBlocks(rows), kRowThreads>>>(
        labels, logsumexp, loss_mask, rows, vocab, vocab_start, scale, static_cast<T*>(logits));
  });
  CUDA_CHECK_LAUNCH("CrossEntropyBackwardKernel");
}

}  // namespace conveyor::cuda
