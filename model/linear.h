// y = x W^T + b with W stored [out, in] as Megatron stores it, optionally sharded for
// tensor parallelism: column-parallel layers hold rows of W (a slice of the outputs),
// row-parallel layers hold columns (a slice of the inputs, whose partial products the
// caller sums over the group before adding the bias with BiasDropoutAdd).
//
// Backward is split: BackwardInput (dx = dy W) runs on the critical path,
// BackwardWeight (dW += dy^T x, db += column sums of dy) can be deferred by
// zero-bubble schedules. Communication is the caller's (see tensor_parallel.h).
#ifndef CONVEYOR_MODEL_LINEAR_H_
#define CONVEYOR_MODEL_LINEAR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "model/parameter.h"
#include "runtime/ops.h"

namespace conveyor {

enum class LinearParallelism { kColumn, kRow };

class Linear {
 public:
  // `split` is the weight's sharding: along dim 0 for kColumn, dim 1 for kRow, or
  // replicated. A column-parallel bias is split like the rows; a row-parallel bias is
  // replicated.
  // `ops` computes the layer; it must outlive the layer.
  Linear(const Ops* ops, ParameterStore* store, const std::string& name, int64_t in, int64_t out,
         bool bias, float init_std, LinearParallelism parallelism = LinearParallelism::kColumn,
         Sharding split = Sharding::Replicated());

  // x is [rows, local_in()], y [rows, local_out()]. Column-parallel (or unsharded):
  // matmul plus bias. Row-parallel: matmul only.
  void Forward(const Tensor& x, Tensor* y) const;
  // Forward into `pre`, then y = GELU(pre) (column-parallel: the MLP's fc1).
  void ForwardGelu(const Tensor& x, Tensor* pre, Tensor* y) const;
  // y = residual + dropout(y + bias): a row-parallel layer's output, summed over the
  // group, rejoining the residual stream (the bias only if the layer has one).
  void BiasDropoutAdd(const CounterRng& rng, float p, uint64_t first_index, const Tensor& residual,
                      Tensor* y) const;
  void BackwardInput(const Tensor& dy, Tensor* dx) const;
  // BackwardInput through the GELU whose input was `pre` (fc2 back to fc1's output).
  void BackwardInputGelu(const Tensor& dy, const Tensor& pre, Tensor* dx) const;
  void BackwardWeight(const Tensor& x, const Tensor& dy);

  void AppendParameters(std::vector<Parameter*>* out) const {
    out->push_back(weight_);
    if (bias_ != nullptr) out->push_back(bias_);
  }

  int64_t local_in() const { return in_; }
  int64_t local_out() const { return out_; }

 private:
  // The bias Forward adds, or null: a row-parallel layer's waits for the group's sum of
  // the partial products (AddBias).
  const Tensor* ForwardBias() const;

  const Ops* ops_;
  LinearParallelism parallelism_;
  int64_t in_;   // local
  int64_t out_;  // local
  Parameter* weight_;
  Parameter* bias_;  // null without bias
};

}  // namespace conveyor

#endif  // CONVEYOR_MODEL_LINEAR_H_
