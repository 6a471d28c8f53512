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

void CudaOptimizerOps::AdamW(const AdamWHyperParams& hp, const float* grad, float* param,
                             float* exp_avg, float* exp_avg_sq, int64_t n) const {
  CUDA_CHECK(LaunchAdamWStep(hp, grad, param, exp_avg, exp_avg_sq, n));
}

void CudaOptimizerOps::Sgd(const SgdHyperParams& hp, const float* grad, float* param,
                           float* momentum_buf, int64_t n) const {
  CUDA_CHECK(LaunchSgdStep(hp.lr, hp.momentum, hp.weight_decay, hp.first_step, grad, param,
                           momentum_buf, n));
}

}  // namespace conveyor
