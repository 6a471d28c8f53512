#include "runtime/cuda/cuda_optimizer_ops.h"

#include <cuda_runtime_api.h>

#include <vector>

#include "runtime/cuda/adamw_kernel.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/optimizer_kernels.h"

namespace conveyor {

CudaOptimizerOps::CudaOptimizerOps() {
  CUDA_CHECK(
      cudaMalloc(reinterpret_cast<void**>(&partials_), kSumOfSquaresMaxBlocks * sizeof(double)));
}

CudaOptimizerOps::~CudaOptimizerOps() { cudaFree(partials_); }

double CudaOptimizerOps::SumOfSquares(const float* x, int64_t n) const {
  int blocks = 0;
  CUDA_CHECK(LaunchSumOfSquares(x, n, partials_, &blocks));
  std::vector<double> host(blocks);
  CUDA_CHECK(cudaMemcpy(host.data(), partials_, blocks * sizeof(double), cudaMemcpyDeviceToHost));
  double squares = 0.0;
  for (double partial : host) squares += partial;
  return squares;
}

void CudaOptimizerOps::Scale(double factor, float* x, int64_t n) const {
  CUDA_CHECK(LaunchScale(factor, x, n));
}

void CudaOptimizerOps::AdamW(const AdamWHyperParams& hp,
                             absl::Span<const AdamWTensor> tensors) const {
  std::vector<AdamWDeviceTensor> table;
  int64_t blocks = 0;
  for (const AdamWTensor& t : tensors) {
    if (t.n == 0) continue;
    AdamWHyperParams own = hp;
    own.weight_decay = t.weight_decay;
    table.push_back({t.grad, t.param, t.exp_avg, t.exp_avg_sq, t.n,
                     ComputeAdamWScalars(own).decay_factor, blocks});
    blocks += (t.n + kAdamWChunk - 1) / kAdamWChunk;
  }
  if (table.empty()) return;
  const AdamWDeviceTensor* device_table = adam_table_.Upload(table.data(), table.size());
  CUDA_CHECK(LaunchAdamWTensors(hp, device_table, static_cast<int>(table.size()), blocks));
}

void CudaOptimizerOps::Sgd(const SgdHyperParams& hp, const float* grad, float* param,
                           float* momentum_buf, int64_t n) const {
  CUDA_CHECK(LaunchSgdStep(hp.lr, hp.momentum, hp.weight_decay, hp.first_step, grad, param,
                           momentum_buf, n));
}

}  // namespace conveyor
