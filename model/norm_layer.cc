#include "model/norm_layer.h"

namespace conveyor {

NormLayer::NormLayer(const Ops* ops, ParameterStore* store, const std::string& name, int64_t width,
                     bool rms, float eps, bool sequence_parallel)
    : ops_(ops),
      kind_(rms ? NormKind::kRmsNorm : NormKind::kLayerNorm),
      width_(width),
      eps_(eps),
      gamma_(store->Add(name + ".weight", {width}, {InitKind::kOnes}, false)),
      beta_(rms ? nullptr : store->Add(name + ".bias", {width}, {InitKind::kZeros}, false)) {
  gamma_->sequence_parallel = sequence_parallel;
  if (beta_ != nullptr) beta_->sequence_parallel = sequence_parallel;
}

NormStats NormLayer::Forward(const Tensor& x, Tensor* y) const {
  const int64_t rows = x.numel() / width_;
  NormStats stats{ops_->NewFloatActivation({rows}), ops_->NewFloatActivation({rows})};
  ops_->NormForward(kind_, x, gamma_->value, beta_ != nullptr ? &beta_->value : nullptr, eps_, y,
                    &stats.mean, &stats.rstd);
  return stats;
}

void NormLayer::BackwardInput(const Tensor& dy, const Tensor& x, const NormStats& stats,
                              Tensor* dx) const {
  ops_->NormBackwardInput(kind_, dy, x, gamma_->value, stats.mean, stats.rstd, dx);
}

void NormLayer::BackwardWeight(const Tensor& dy, const Tensor& x, const NormStats& stats) {
  ops_->NormBackwardWeight(dy, x, stats.mean, stats.rstd, &gamma_->grad,
                           beta_ != nullptr ? &beta_->grad : nullptr);
}

}  // namespace conveyor
