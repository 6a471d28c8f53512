#include "model/linear.h"

namespace conveyor {

Linear::Linear(const Ops* ops, ParameterStore* store, const std::string& name, int64_t in,
               int64_t out, bool bias, float init_std, LinearParallelism parallelism,
               Sharding split)
    : ops_(ops),
      parallelism_(parallelism),
      weight_(store->Add(name + ".weight", {out, in}, {InitKind::kNormal, init_std}, true, split)),
      bias_(nullptr) {
  weight_->read_in_compute_type = true;
  out_ = weight_->local_shape[0];
  in_ = weight_->local_shape[1];
  if (bias) {
    const bool split_bias = parallelism == LinearParallelism::kColumn && !split.replicated();
    bias_ = store->Add(name + ".bias", {out}, {InitKind::kZeros}, false,
                       split_bias ? Sharding{0, split.ranges} : Sharding::Replicated());
  }
}

void Linear::BiasDropoutAdd(const CounterRng& rng, float p, uint64_t first_index,
                            const Tensor& residual, Tensor* y) const {
  ops_->BiasDropoutAdd(bias_ != nullptr ? &bias_->value : nullptr, rng, p, first_index, residual,
                       y);
}

const Tensor* Linear::ForwardBias() const {
  const bool added_here = bias_ != nullptr && parallelism_ == LinearParallelism::kColumn;
  return added_here ? &bias_->value : nullptr;
}

void Linear::Forward(const Tensor& x, Tensor* y) const {
  ops_->LinearForward(x, weight_->compute_value(), ForwardBias(), y);
}

void Linear::ForwardGelu(const Tensor& x, Tensor* pre, Tensor* y) const {
  ops_->LinearGeluForward(x, weight_->compute_value(), ForwardBias(), pre, y);
}

void Linear::BackwardInput(const Tensor& dy, Tensor* dx) const {
  ops_->Gemm(false, false, dy.dim(0), in_, out_, 1.0f, dy, weight_->compute_value(), 0.0f, dx);
}

void Linear::BackwardInputGelu(const Tensor& dy, const Tensor& pre, Tensor* dx) const {
  ops_->LinearGeluBackwardInput(dy, weight_->compute_value(), pre, dx);
}

void Linear::BackwardWeight(const Tensor& x, const Tensor& dy) {
  ops_->LinearWeightGrad(x, dy, &weight_->grad, bias_ != nullptr ? &bias_->grad : nullptr);
}

}  // namespace conveyor
