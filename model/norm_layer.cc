#include "model/norm_layer.h"

namespace conveyor {

NormLayer::NormLayer(ParameterStore* store, const std::string& name, int64_t width, bool rms,
                     float eps, bool sequence_parallel)
    : kind_(rms ? cpu::NormKind::kRmsNorm : cpu::NormKind::kLayerNorm),
      width_(width),
      eps_(eps),
      gamma_(store->Add(name + ".weight", {width}, {InitKind::kOnes}, false)),
      beta_(rms ? nullptr : store->Add(name + ".bias", {width}, {InitKind::kZeros}, false)) {
  gamma_->sequence_parallel = sequence_parallel;
  if (beta_ != nullptr) beta_->sequence_parallel = sequence_parallel;
}

NormStats NormLayer::Forward(const Tensor& x, Tensor* y) const {
  const int64_t rows = x.numel() / width_;
  NormStats stats{Tensor::Zeros({rows}, MemoryCategory::kActivations),
                  Tensor::Zeros({rows}, MemoryCategory::kActivations)};
  cpu::NormForward(kind_, x.data(), gamma_->value.data(), beta_ ? beta_->value.data() : nullptr,
                   rows, width_, eps_, y->data(), stats.mean.data(), stats.rstd.data());
  return stats;
}

void NormLayer::BackwardInput(const Tensor& dy, const Tensor& x, const NormStats& stats,
                              Tensor* dx) const {
  cpu::NormBackwardInput(kind_, dy.data(), x.data(), gamma_->value.data(), stats.mean.data(),
                         stats.rstd.data(), x.numel() / width_, width_, dx->data());
}

void NormLayer::BackwardWeight(const Tensor& dy, const Tensor& x, const NormStats& stats) {
  cpu::NormBackwardWeight(dy.data(), x.data(), stats.mean.data(), stats.rstd.data(),
                          x.numel() / width_, width_, gamma_->grad.data(),
                          beta_ ? beta_->grad.data() : nullptr);
}

}  // namespace conveyor
