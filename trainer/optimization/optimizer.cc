#include "trainer/optimization/optimizer.h"

#include <algorithm>

#include "proto/config_choices.h"

namespace conveyor {

std::vector<OptimizerSegment> WholeParameterSegments(const std::vector<Parameter*>& params) {
  std::vector<OptimizerSegment> segments;
  for (Parameter* p : params) {
    segments.push_back({p->value.data(), p->grad.data(), p->value.numel(), p->weight_decay, p, 0});
  }
  return segments;
}

double ClipCoefficient(double norm, double max_norm) {
  if (max_norm <= 0.0) return 1.0;
  return std::min(1.0, max_norm / (norm + 1e-6));
}

Optimizer::Optimizer(const OptimizerConfig& config, OptimizerKind kind,
                     std::vector<OptimizerSegment> segments, const OptimizerOps* ops)
    : config_(config),
      adam_(kind == OptimizerKind::kAdam),
      segments_(std::move(segments)),
      ops_(ops) {
  auto state = [&](int64_t n) {
    return Tensor::Zeros({n}, MemoryCategory::kOptimizer, DType::kFloat32, ops_->device());
  };
  for (size_t i = 0; i < segments_.size(); ++i) {
    const OptimizerSegment& s = segments_[i];
    state_.push_back({state(s.n), adam_ ? state(s.n) : Tensor()});
    if (adam_) {
      State& st = state_.back();
      adam_tensors_[Decoupled(i) ? 1 : 0].push_back(
          {s.grad, s.param, st.exp_avg.data(), st.exp_avg_sq.data(), s.n,
           s.weight_decay ? config_.weight_decay() : 0.0f});
    }
  }
}

bool Optimizer::Decoupled(size_t i) const {
  // Megatron's is_embedding_or_output_parameter group, a group only with --decoupled-lr.
  const Parameter* owner = segments_[i].owner;
  return config_.has_decoupled_lr() && owner != nullptr && owner->embedding_or_output;
}

void Optimizer::Step(const StepLearningRates& lr, double grad_scale) {
  ++steps_;
  if (adam_) {
    for (const int group : {0, 1}) {
      if (adam_tensors_[group].empty()) continue;
      const AdamWHyperParams hp{static_cast<float>(group == 1 ? lr.decoupled : lr.main),
                                config_.adam_beta1(),
                                config_.adam_beta2(),
                                config_.adam_eps(),
                                0.0f,
                                steps_,
                                grad_scale};
      ops_->AdamW(hp, adam_tensors_[group]);
    }
    return;
  }
  for (size_t i = 0; i < segments_.size(); ++i) {
    const OptimizerSegment& seg = segments_[i];
    if (grad_scale != 1.0) ops_->Scale(grad_scale, seg.grad, seg.n);
    const float weight_decay = seg.weight_decay ? config_.weight_decay() : 0.0f;
    const SgdHyperParams hp{static_cast<float>(Decoupled(i) ? lr.decoupled : lr.main),
                            config_.sgd_momentum(), weight_decay, steps_ == 1};
    ops_->Sgd(hp, seg.grad, seg.param, state_[i].exp_avg.data(), seg.n);
  }
}

}  // namespace conveyor
