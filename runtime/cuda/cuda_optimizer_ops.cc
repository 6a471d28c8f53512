#include "runtime/cuda/cuda_optimizer_ops.h"

#include <cuda_runtime_api.h>

#include <vector>

#include "runtime/cuda/adamw_kernel.h"
#include "runtime/cuda/cast_kernels.h"
#include "runtime/cuda/elementwise_kernels.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/optimizer_kernels.h"

namespace conveyor {

CudaOptimizerOps::CudaOptimizerOps() { CUDA_CHECK(cudaGetDevice(&device_)); }

void CudaOptimizerOps::MakeCurrent() const {
  int current = -1;
  CUDA_CHECK(cudaGetDevice(&current));
  if (current != device_) CUDA_CHECK(cudaSetDevice(device_));
}

double CudaOptimizerOps::SumOfSquares(absl::Span<const FloatArray> arrays) const {
  MakeCurrent();
  std::vector<SquaresArray> table;
  int64_t blocks = 0;
  for (const FloatArray& a : arrays) {
    if (a.n == 0) continue;
    const int own = SumOfSquaresBlocks(a.n);
    table.push_back({a.data, a.n, blocks, own});
    blocks += own;
  }
  if (table.empty()) return 0.0;
  const SquaresArray* device_table = squares_table_.Upload(table.data(), table.size());
  auto* partials = static_cast<double*>(partials_.Reserve(blocks * sizeof(double)));
  CUDA_CHECK(LaunchSumsOfSquares(device_table, static_cast<int>(table.size()), blocks, partials));
  std::vector<double> host(blocks);
  partials_.Download(host.data(), blocks);
  // Each array's partials in block order, then the arrays in order: the same additions
  // as one launch per array.
  double total = 0.0;
  for (const SquaresArray& a : table) {
    double squares = 0.0;
    for (int b = 0; b < a.blocks; ++b) squares += host[a.first_block + b];
    total += squares;
  }
  return total;
}

int64_t CudaOptimizerOps::CountZeros(absl::Span<const FloatArray> arrays) const {
  MakeCurrent();
  auto* count = static_cast<unsigned long long*>(partials_.Reserve(sizeof(unsigned long long)));
  CUDA_CHECK(cudaMemsetAsync(count, 0, sizeof(*count), nullptr));
  for (const FloatArray& a : arrays) CUDA_CHECK(LaunchCountZeros(a.data, a.n, count));
  unsigned long long host = 0;
  CUDA_CHECK(cudaMemcpy(&host, count, sizeof(host), cudaMemcpyDeviceToHost));
  return static_cast<int64_t>(host);
}

void CudaOptimizerOps::Scale(double factor, float* x, int64_t n) const {
  MakeCurrent();
  CUDA_CHECK(LaunchScale(factor, x, n));
}

void CudaOptimizerOps::Add(const float* x, float* y, int64_t n) const {
  MakeCurrent();
  cuda::LaunchAdd(DType::kFloat32, x, y, n);
}

void CudaOptimizerOps::RoundToBFloat16(const float* in, BFloat16* out, int64_t n) const {
  MakeCurrent();
  CUDA_CHECK(LaunchFloatToBFloat16(in, out, n));
}

void CudaOptimizerOps::WidenFromBFloat16(const BFloat16* in, float* out, int64_t n) const {
  MakeCurrent();
  CUDA_CHECK(LaunchBFloat16ToFloat(in, out, n));
}

void CudaOptimizerOps::AdamW(const AdamWHyperParams& hp,
                             absl::Span<const AdamWTensor> tensors) const {
  MakeCurrent();
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
  MakeCurrent();
  CUDA_CHECK(LaunchSgdStep(hp.lr, hp.momentum, hp.weight_decay, hp.first_step, grad, param,
                           momentum_buf, n));
}

}  // namespace conveyor
