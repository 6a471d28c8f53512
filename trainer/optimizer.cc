#include "trainer/optimizer.h"

#include <cmath>

#include "runtime/cpu/adamw.h"

namespace conveyor {

std::vector<OptimizerSegment> WholeParameterSegments(const std::vector<Parameter*>& params) {
  std::vector<OptimizerSegment> segments;
  for (Parameter* p : params) {
    segments.push_back({p->value.data(), p->grad.data(), p->value.numel(), p->weight_decay, p, 0});
  }
  return segments;
}

void ClipGradients(const std::vector<OptimizerSegment>& segments, double norm, double max_norm) {
  if (max_norm <= 0.0) return;
  const double coeff = max_norm / (norm + 1e-6);
  if (coeff >= 1.0) return;
  for (const OptimizerSegment& s : segments) {
    for (int64_t i = 0; i < s.n; ++i) s.grad[i] = static_cast<float>(s.grad[i] * coeff);
  }
}

Optimizer::Optimizer(const OptimizerConfig& config, std::vector<OptimizerSegment> segments)
    : config_(config), segments_(std::move(segments)) {
  const bool adam = config_.optimizer() == "adam";
  for (const OptimizerSegment& s : segments_) {
    state_.push_back({Tensor::Zeros({s.n}, MemoryCategory::kOptimizer),
                      adam ? Tensor::Zeros({s.n}, MemoryCategory::kOptimizer) : Tensor()});
  }
}

void Optimizer::Step(double lr) {
  ++steps_;
  for (size_t i = 0; i < segments_.size(); ++i) {
    const OptimizerSegment& seg = segments_[i];
    State& s = state_[i];
    const float weight_decay = seg.weight_decay ? config_.weight_decay() : 0.0f;
    if (config_.optimizer() == "adam") {
      const AdamWHyperParams hp{static_cast<float>(lr), config_.adam_beta1(), config_.adam_beta2(),
                                config_.adam_eps(),     weight_decay,         steps_};
      AdamWStep(hp, seg.grad, seg.param, s.exp_avg.data(), s.exp_avg_sq.data(), seg.n);
      continue;
    }
    // torch.optim.SGD: g += wd * p; buf = momentum * buf + g (buf = g at the first step);
    // p -= lr * buf.
    float* buf = s.exp_avg.data();
    for (int64_t j = 0; j < seg.n; ++j) {
      const float d = seg.grad[j] + weight_decay * seg.param[j];
      buf[j] = steps_ == 1 ? d : config_.sgd_momentum() * buf[j] + d;
      seg.param[j] -= static_cast<float>(lr) * buf[j];
    }
  }
}

}  // namespace conveyor
