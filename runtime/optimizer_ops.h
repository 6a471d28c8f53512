// fp32 vector arithmetic over n contiguous elements on one device: what the optimizer
// runs over its flat segments (whole parameters, or a distributed-optimizer shard's
// pieces of them). One implementation per backend, like runtime/ops.h; pointers are
// addresses on that backend's device.
#ifndef CONVEYOR_RUNTIME_OPTIMIZER_OPS_H_
#define CONVEYOR_RUNTIME_OPTIMIZER_OPS_H_

#include <cstdint>

#include "absl/types/span.h"
#include "runtime/adamw_params.h"
#include "runtime/device_memory.h"
#include "runtime/dtype.h"

namespace conveyor {

// torch.optim.SGD with momentum and (coupled) weight decay.
struct SgdHyperParams {
  float lr;
  float momentum;
  float weight_decay;
  bool first_step;  // the momentum buffer starts as the first update
};

// n contiguous fp32 elements on the device.
struct FloatArray {
  const float* data;
  int64_t n;
};

// One tensor's part in an AdamW step: its fp32 arrays on the device and its weight decay
// (Megatron exempts biases and norm weights).
struct AdamWTensor {
  const float* grad;
  float* param;
  float* exp_avg;
  float* exp_avg_sq;
  int64_t n;
  float weight_decay;
};

class OptimizerOps {
 public:
  virtual ~OptimizerOps() = default;

  virtual Device device() const = 0;

  // The sum over `arrays`, in order, of each one's sum_i x[i]^2 accumulated in double
  // (the gradient norm's squares). A backend may reduce them all in one launch and bring
  // the result to the host once.
  virtual double SumOfSquares(absl::Span<const FloatArray> arrays) const = 0;
  // The number of elements equal to zero over `arrays` (--log-num-zeros-in-grad).
  virtual int64_t CountZeros(absl::Span<const FloatArray> arrays) const = 0;
  // x[i] = float(x[i] * factor), the product taken in double (Megatron's clipping).
  virtual void Scale(double factor, float* x, int64_t n) const = 0;
  // One in-place AdamW step over every tensor, in torch.optim.AdamW's order
  // (runtime/cpu/adamw.h), each with its own weight decay (hp.weight_decay is not used).
  // A backend may update them all in one launch (multi-tensor apply).
  virtual void AdamW(const AdamWHyperParams& hp, absl::Span<const AdamWTensor> tensors) const = 0;
  // y[i] += x[i] (a tied embedding's two local copies summing their gradients).
  virtual void Add(const float* x, float* y, int64_t n) const = 0;
  // out[i] = ToBFloat16(in[i]) (runtime/dtype.h): the distributed optimizer's bf16
  // parameters from its fp32 master shard.
  virtual void RoundToBFloat16(const float* in, BFloat16* out, int64_t n) const = 0;
  // out[i] = ToFloat(in[i]) (exact): gradients reduced in bf16, back into fp32.
  virtual void WidenFromBFloat16(const BFloat16* in, float* out, int64_t n) const = 0;
  // d = g + wd * p; buf = first_step ? d : momentum * buf + d; p -= lr * buf.
  virtual void Sgd(const SgdHyperParams& hp, const float* grad, float* param, float* momentum_buf,
                   int64_t n) const = 0;
};

}  // namespace conveyor

#endif  // CONVEYOR_RUNTIME_OPTIMIZER_OPS_H_
