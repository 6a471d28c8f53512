#include "model/moe_layer.h"

#include <algorithm>
#include <cmath>

#include "base/status_macros.h"

namespace conveyor {

MoeLayer::MoeLayer(const Ops* ops, ParameterStore* store, const std::string& name,
                   const ModelShape& shape, const TensorParallel& tp)
    : ops_(ops),
      shape_(shape),
      router_(ops, store, name + ".router", shape.hidden, shape.moe, shape.init_std, tp),
      experts_(ops, store, name + ".experts", shape.moe.experts(), shape.hidden,
               shape.moe.ffn_hidden, shape.swiglu, shape.init_std, shape.output_init_std(), tp) {
  const MoeShape& moe = shape.moe;
  if (moe.shared_expert_ffn > 0) {
    shared_ = std::make_unique<ExpertMlp>(ops, store, name + ".shared_experts", shape.hidden,
                                          moe.shared_expert_ffn, shape.swiglu, shape.init_std,
                                          shape.output_init_std(), tp);
  }
  if (moe.shared_expert_gate) {
    shared_gate_ = std::make_unique<Linear>(ops, store, name + ".shared_experts.gate",
                                            shape.hidden, 1, /*bias=*/false, shape.init_std);
    std::vector<Parameter*> weight;
    shared_gate_->AppendParameters(&weight);
    // Its gradient is a partial sum over TP, as the router's (the shared expert's output
    // is): summed like Megatron's sequence-parallel gate weight.
    weight.front()->sequence_parallel = tp.sequence_parallel();
  }
}

namespace {

// fc1 of an expert MLP of width `ffn` (SwiGLU's holds the gate and the up halves).
int64_t FirstLayerElements(const ModelShape& s, int64_t ffn) {
  return (s.swiglu ? 2 * ffn : ffn) * s.hidden;
}

}  // namespace

std::vector<int64_t> MoeWeightElements(const ModelShape& s, int tp, int ep, int etp) {
  const MoeShape& moe = s.moe;
  std::vector<int64_t> elements = {moe.experts() * s.hidden};
  auto expert = [&](int64_t ffn, int shards) {
    elements.push_back(FirstLayerElements(s, ffn / shards));
    elements.push_back(s.hidden * (ffn / shards));
  };
  for (int64_t e = 0; e < moe.experts() / ep; ++e) expert(moe.ffn_hidden, etp > 0 ? etp : tp);
  if (moe.shared_expert_ffn > 0) expert(moe.shared_expert_ffn, tp);
  if (moe.shared_expert_gate) elements.push_back(s.hidden);
  return elements;
}

int64_t ExpertWeightElements(const ModelShape& s, int tp) {
  const int64_t ffn = s.moe.ffn_hidden / tp;
  return FirstLayerElements(s, ffn) + s.hidden * ffn;
}

int64_t InactiveExpertParameters(const ModelShape& s, int tp) {
  return (s.moe.experts() - s.moe.router.topk) * ExpertWeightElements(s, tp);
}

absl::StatusOr<Tensor> MoeLayer::Forward(const Tensor& x, const MicroBatchContext& mb,
                                         MoeStash* stash) const {
  const int64_t tokens = x.dim(0);
  RETURN_IF_ERROR(router_.Forward(x, mb, &stash->router));
  const RouterStash& route = stash->router;
  stash->plan = PlanDispatch(route.routing.experts, route.keep, shape_.moe.router.topk,
                             shape_.moe.experts(), route.pad_rows);
  const DispatchPlan& plan = stash->plan;
  // Each expert's input rows; the experts keep what W needs of them (these very rows on
  // one rank, else their own copy, and these go when forward ends).
  Tensor permuted = ops_->NewActivation({plan.rows(), shape_.hidden});
  ops_->PermuteTokens(x, plan.token_of_row, {}, &permuted);
  ASSIGN_OR_RETURN(stash->expert_out,
                   experts_.Forward(permuted, plan.expert_begin, &stash->experts));
  Tensor y = ops_->NewActivation({tokens, shape_.hidden});
  ops_->UnpermuteTokens(stash->expert_out, plan.row_of_slot, route.routing.probs, &y);
  if (shared_ != nullptr) {
    Tensor shared_out = ops_->NewActivation({tokens, shape_.hidden});
    shared_->Forward(x, &stash->shared, &shared_out);
    if (shared_gate_ != nullptr) shared_out = GateSharedOutput(x, shared_out, stash);
    ops_->Add(shared_out, &y);
  }
  return y;
}

absl::StatusOr<Tensor> MoeLayer::BackwardInput(const Tensor& x, const Tensor& dy,
                                               float aux_loss_scale, MoeStash* stash) const {
  const int64_t tokens = dy.dim(0);
  stash->x = x;
  const DispatchPlan& plan = stash->plan;
  const std::vector<float>& probs = stash->router.routing.probs;
  // y[t] = sum_j p[t, j] out[row(t, j)]: dp[t, j] = dy[t] . out[row(t, j)] and
  // d out[r] = p[slot(r)] dy[token(r)].
  std::vector<float> d_probs(probs.size());
  ops_->SlotDots(dy, stash->expert_out, plan.row_of_slot, absl::MakeSpan(d_probs));
  stash->expert_out = Tensor();  // only the routing weights' gradient reads it
  std::vector<float> row_weight(plan.rows(), 0.0f);
  for (int64_t r = 0; r < plan.rows(); ++r) {
    if (plan.slot_of_row[r] >= 0) row_weight[r] = probs[plan.slot_of_row[r]];
  }
  Tensor d_permuted_out = ops_->NewActivation({plan.rows(), shape_.hidden});
  ops_->PermuteTokens(dy, plan.token_of_row, row_weight, &d_permuted_out);
  ASSIGN_OR_RETURN(const Tensor d_permuted,
                   experts_.BackwardInput(d_permuted_out, &stash->experts));
  // Each token's input gradient: the sum over its kept slots (padding rows have none).
  Tensor dx = ops_->NewActivation({tokens, shape_.hidden});
  ops_->UnpermuteTokens(d_permuted, plan.row_of_slot, {}, &dx);
  if (shared_ != nullptr) {
    Tensor d_shared = ops_->NewActivation({tokens, shape_.hidden});
    const Tensor d_out = shared_gate_ != nullptr ? GateSharedBackward(dy, stash, &dx) : dy;
    shared_->BackwardInput(d_out, &stash->shared, &d_shared);
    ops_->Add(d_shared, &dx);
  }
  router_.BackwardInput(d_probs, aux_loss_scale, &stash->router, &dx);
  return dx;
}

void MoeLayer::BackwardWeight(MoeStash* stash) {
  ++metrics_.micro_batches;
  metrics_.losses += stash->router.losses;
  const std::vector<int64_t> tokens = stash->plan.TokensPerExpert();
  metrics_.tokens_per_expert.resize(tokens.size(), 0);
  for (size_t e = 0; e < tokens.size(); ++e) metrics_.tokens_per_expert[e] += tokens[e];
  metrics_.dropped +=
      std::count(stash->plan.row_of_slot.begin(), stash->plan.row_of_slot.end(), -1);
  experts_.BackwardWeight(&stash->experts);
  if (shared_ != nullptr) shared_->BackwardWeight(stash->x, &stash->shared);
  if (shared_gate_ != nullptr) shared_gate_->BackwardWeight(stash->x, stash->d_shared_gate);
  router_.BackwardWeight(stash->x, &stash->router);
  *stash = MoeStash();
}

MoeLayerMetrics MoeLayer::TakeMetrics() {
  MoeLayerMetrics taken = std::move(metrics_);
  metrics_ = MoeLayerMetrics();
  return taken;
}

void MoeLayer::AppendParameters(std::vector<Parameter*>* out) const {
  router_.AppendParameters(out);
  experts_.AppendParameters(out);
  if (shared_ != nullptr) shared_->AppendParameters(out);
  if (shared_gate_ != nullptr) shared_gate_->AppendParameters(out);
}

namespace {

// 0, 1, ..., n - 1: each token its own row (and slot) for the row-weighting ops.
std::vector<int32_t> Identity(int64_t n) {
  std::vector<int32_t> index(n);
  for (int64_t i = 0; i < n; ++i) index[i] = static_cast<int32_t>(i);
  return index;
}

}  // namespace

Tensor MoeLayer::GateSharedOutput(const Tensor& x, const Tensor& out, MoeStash* stash) const {
  const int64_t tokens = x.dim(0);
  Tensor logits = ops_->NewActivation({tokens, 1});
  shared_gate_->Forward(x, &logits);
  stash->shared_gate = ToHostFloats(*ops_, logits);
  for (float& g : stash->shared_gate) g = 1.0f / (1.0f + std::exp(-g));
  stash->shared_out = out;
  Tensor gated = ops_->NewActivation({tokens, shape_.hidden});
  ops_->PermuteTokens(out, Identity(tokens), stash->shared_gate, &gated);
  return gated;
}

Tensor MoeLayer::GateSharedBackward(const Tensor& dy, MoeStash* stash, Tensor* dx) const {
  // y = s * u with s = sigmoid(z), z = x g: du = s dy, dz = s (1 - s) <dy, u>, and dx += dz g.
  // Under TP u, so dz, is this rank's part of a sum, like the router's.
  const int64_t tokens = dy.dim(0);
  const std::vector<int32_t> identity = Identity(tokens);
  std::vector<float> dz(tokens);
  ops_->SlotDots(dy, stash->shared_out, identity, absl::MakeSpan(dz));
  stash->shared_out = Tensor();
  for (int64_t t = 0; t < tokens; ++t) {
    const float s = stash->shared_gate[t];
    dz[t] *= s * (1.0f - s);
  }
  stash->d_shared_gate = FromHostFloats(*ops_, dz, {tokens, 1});
  Tensor d_x = ops_->NewActivation({tokens, shape_.hidden});
  shared_gate_->BackwardInput(stash->d_shared_gate, &d_x);
  ops_->Add(d_x, dx);
  Tensor d_out = ops_->NewActivation({tokens, shape_.hidden});
  ops_->PermuteTokens(dy, identity, stash->shared_gate, &d_out);
  return d_out;
}

}  // namespace conveyor
