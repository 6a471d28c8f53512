// The CUDA backend of the optimizer's vector arithmetic (runtime/optimizer_ops.h), on
// the default stream like CudaOps. Checked against CpuOptimizerOps by
// //tests/runtime:cuda_optimizer_ops_test on a GPU.
#ifndef CONVEYOR_RUNTIME_CUDA_CUDA_OPTIMIZER_OPS_H_
#define CONVEYOR_RUNTIME_CUDA_CUDA_OPTIMIZER_OPS_H_

#include "runtime/cuda/staging_buffer.h"
#include "runtime/optimizer_ops.h"

namespace conveyor {

class CudaOptimizerOps : public OptimizerOps {
 public:
  // Runs on the device current when constructed (after the rank selected its GPU), and
  // makes it current on the calling thread first: the data-parallel communication thread
  // (trainer/optimization/communication_thread.h) rounds and widens buckets through it.
  CudaOptimizerOps();

  Device device() const override { return Device::kCuda; }
  // Every array in one launch; waits for the device once (the norm decides the step on
  // the host).
  double SumOfSquares(absl::Span<const FloatArray> arrays) const override;
  int64_t CountZeros(absl::Span<const FloatArray> arrays) const override;
  void Scale(double factor, float* x, int64_t n) const override;
  // All tensors in one launch (multi-tensor apply).
  void AdamW(const AdamWHyperParams& hp, absl::Span<const AdamWTensor> tensors) const override;
  void Add(const float* x, float* y, int64_t n) const override;
  void RoundToBFloat16(const float* in, BFloat16* out, int64_t n) const override;
  void WidenFromBFloat16(const BFloat16* in, float* out, int64_t n) const override;
  void Sgd(const SgdHyperParams& hp, const float* grad, float* param, float* momentum_buf,
           int64_t n) const override;

 private:
  void MakeCurrent() const;

  int device_ = 0;
  mutable cuda::StagingBuffer squares_table_;  // the SquaresArray table of a norm
  mutable cuda::StagingBuffer partials_;       // its per-block partial sums
  mutable cuda::StagingBuffer adam_table_;     // the step's AdamWDeviceTensor table
};

}  // namespace conveyor

#endif  // CONVEYOR_RUNTIME_CUDA_CUDA_OPTIMIZER_OPS_H_
