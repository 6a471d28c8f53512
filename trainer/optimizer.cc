#include "trainer/optimizer.h"

#include <cmath>

#include "runtime/cpu/adamw.h"

namespace conveyor {

double GlobalGradNorm(const std::vector<Parameter*>& params) {
  double sum = 0.0;
  for (const Parameter* p : params) {
    const float* g = p->grad.data();
    for (int64_t i = 0; i < p->grad.numel(); ++i) sum += static_cast<double>(g[i]) * g[i];
  }
  return std::sqrt(sum);
}

void ClipGradients(const std::vector<Parameter*>& params, double norm, double max_norm) {
  if (max_norm <= 0.0) return;
  const double coeff = max_norm / (norm + 1e-6);
  if (coeff >= 1.0) return;
  for (Parameter* p : params) {
    float* g = p->grad.data();
    for (int64_t i = 0; i < p->grad.numel(); ++i) g[i] = static_cast<float>(g[i] * coeff);
  }
}

Optimizer::Optimizer(const OptimizerConfig& config, std::vector<Parameter*> params)
    : config_(config), params_(std::move(params)) {
  const bool adam = config_.optimizer() == "adam";
  for (const Parameter* p : params_) {
    state_.push_back({Tensor::Zeros(p->value.shape(), MemoryCategory::kOptimizer),
                      adam ? Tensor::Zeros(p->value.shape(), MemoryCategory::kOptimizer)
                           : Tensor()});
  }
}

void Optimizer::Step(double lr) {
  ++steps_;
  for (size_t i = 0; i < params_.size(); ++i) {
    Parameter* p = params_[i];
    State& s = state_[i];
    const float weight_decay = p->weight_decay ? config_.weight_decay() : 0.0f;
    if (config_.optimizer() == "adam") {
      const AdamWHyperParams hp{static_cast<float>(lr), config_.adam_beta1(),
                                config_.adam_beta2(), config_.adam_eps(), weight_decay, steps_};
      AdamWStep(hp, p->grad.data(), p->value.data(), s.exp_avg.data(), s.exp_avg_sq.data(),
                p->value.numel());
      continue;
    }
    // torch.optim.SGD: g += wd * p; buf = momentum * buf + g (buf = g at the first step);
    // p -= lr * buf.
    float* v = p->value.data();
    const float* g = p->grad.data();
    float* buf = s.exp_avg.data();
    for (int64_t j = 0; j < p->value.numel(); ++j) {
      const float d = g[j] + weight_decay * v[j];
      buf[j] = steps_ == 1 ? d : config_.sgd_momentum() * buf[j] + d;
      v[j] -= static_cast<float>(lr) * buf[j];
    }
  }
}

}  // namespace conveyor
