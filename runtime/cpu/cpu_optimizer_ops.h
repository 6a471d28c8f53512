// The CPU backend of the optimizer's vector arithmetic (the reference the CUDA kernels
// are checked against).
#ifndef CONVEYOR_RUNTIME_CPU_CPU_OPTIMIZER_OPS_H_
#define CONVEYOR_RUNTIME_CPU_CPU_OPTIMIZER_OPS_H_

#include "runtime/optimizer_ops.h"

namespace conveyor {

class CpuOptimizerOps : public OptimizerOps {
 public:
  // The process's instance (it has no state).
  static const CpuOptimizerOps& Get();

  Device device() const override { return Device::kCpu; }
  double SumOfSquares(absl::Span<const FloatArray> arrays) const override;
  int64_t CountZeros(absl::Span<const FloatArray> arrays) const override;
  void Scale(double factor, float* x, int64_t n) const override;
  void AdamW(const AdamWHyperParams& hp, absl::Span<const AdamWTensor> tensors) const override;
  void Add(const float* x, float* y, int64_t n) const override;
  void RoundToBFloat16(const float* in, BFloat16* out, int64_t n) const override;
  void WidenFromBFloat16(const BFloat16* in, float* out, int64_t n) const override;
  void Sgd(const SgdHyperParams& hp, const float* grad, float* param, float* momentum_buf,
           int64_t n) const override;
};

}  // namespace conveyor

#endif  // CONVEYOR_RUNTIME_CPU_CPU_OPTIMIZER_OPS_H_
