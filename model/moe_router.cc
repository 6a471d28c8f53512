#include "model/moe_router.h"

#include <algorithm>

#include "base/status_macros.h"
#include "model/context_rows.h"

namespace conveyor {

std::vector<float> ToHostFloats(const Ops& ops, const Tensor& t) {
  const Tensor host = ops.CastTo(t, DType::kFloat32).To(Device::kCpu, MemoryCategory::kActivations);
  return std::vector<float>(host.data(), host.data() + host.numel());
}

Tensor FromHostFloats(const Ops& ops, const std::vector<float>& values,
                      std::vector<int64_t> shape) {
  Tensor host = Tensor::Zeros(std::move(shape), MemoryCategory::kActivations);
  std::copy(values.begin(), values.end(), host.data());
  return ops.CastTo(host.To(ops.device(), MemoryCategory::kActivations), ops.compute_dtype());
}

MoeRouter::MoeRouter(const Ops* ops, ParameterStore* store, const std::string& name, int64_t hidden,
                     const MoeShape& moe, float init_std, const TensorParallel& tp)
    : ops_(ops),
      moe_(moe),
      tp_size_(tp.size()),
      gate_(ops, store, name, hidden, moe.experts(), false, init_std) {
  std::vector<Parameter*> weight;
  gate_.AppendParameters(&weight);
  // Validation asks for --sequence-parallel with TP > 1, so this sums its parts over TP.
  weight.front()->sequence_parallel = tp.sequence_parallel();
  if (moe.expert_bias) bias_ = std::make_unique<ExpertBias>(name + ".expert_bias", moe.experts());
}

absl::Status MoeRouter::Forward(const Tensor& x, const MicroBatchContext& mb,
                                RouterStash* stash) const {
  const int64_t tokens = x.dim(0), experts = moe_.experts(), topk = moe_.router.topk;
  Tensor logits = ops_->NewActivation({tokens, experts});
  gate_.Forward(x, &logits);
  stash->logits = ToHostFloats(*ops_, logits);
  ASSIGN_OR_RETURN(const std::vector<float> all, GatherMicroBatchRows(mb, stash->logits, experts));
  const RouterStash whole = RouteMicroBatch(all, mb);
  stash->routing.experts = LocalRowsOfWidth<int32_t>(mb, whole.routing.experts, topk);
  stash->routing.probs = LocalRowsOfWidth<float>(mb, whole.routing.probs, topk);
  stash->keep.clear();
  if (!whole.keep.empty()) stash->keep = LocalRowsOfWidth<uint8_t>(mb, whole.keep, topk);
  // No expert keeps more of a rank's slots than the rank has tokens (k distinct picks).
  stash->pad_rows = std::min(whole.pad_rows, tokens);
  stash->aux_grad.clear();
  if (!whole.aux_grad.empty()) {
    stash->aux_grad = LocalRowsOfWidth<float>(mb, whole.aux_grad, experts);
  }
  stash->load_balancing_loss = whole.load_balancing_loss;
  stash->z_loss = whole.z_loss;
  return absl::OkStatus();
}

RouterStash MoeRouter::RouteMicroBatch(const std::vector<float>& logits,
                                       const MicroBatchContext& mb) const {
  const int64_t tokens = mb.batch * mb.seq, experts = moe_.experts();
  RouterStash whole;
  whole.routing = RouteTopK(moe_.router, logits,
                            bias_ != nullptr ? bias_->values() : absl::Span<const float>());
  if (moe_.drops_tokens()) {
    const int64_t capacity =
        ExpertCapacity(tokens, moe_.router.topk, experts, moe_.capacity_factor);
    whole.keep = CapacityKeep(moe_.router, whole.routing, capacity, moe_.drop_policy);
  }
  whole.pad_rows = PaddedExpertRows(moe_, tokens);
  if (!mb.training) return whole;  // Megatron computes no auxiliary loss in evaluation
  const bool balancing = moe_.balancing != MoeLoadBalancingType::kNone && moe_.aux_loss_coeff > 0;
  const bool z = moe_.z_loss_coeff > 0;
  if (!balancing && !z) return whole;
  whole.aux_grad.assign(logits.size(), 0.0f);
  if (balancing) {
    // seq_aux_loss: the loss of each sequence, averaged over the micro-batch's sequences.
    const int64_t groups = moe_.balancing == MoeLoadBalancingType::kSeqAuxLoss ? mb.batch : 1;
    whole.load_balancing_loss = LoadBalancingLoss(moe_.router, logits, groups, moe_.aux_loss_coeff,
                                                  absl::MakeSpan(whole.aux_grad));
  }
  if (z) {
    whole.z_loss = ZLoss(experts, logits, moe_.z_loss_coeff, absl::MakeSpan(whole.aux_grad));
  }
  return whole;
}

void MoeRouter::BackwardInput(absl::Span<const float> d_probs, float aux_loss_scale,
                              RouterStash* stash, Tensor* dx) const {
  const int64_t tokens = dx->dim(0), experts = moe_.experts();
  std::vector<float> d_logits(stash->logits.size(), 0.0f);
  const float aux_part = aux_loss_scale / static_cast<float>(tp_size_);  // a TP rank's share
  for (size_t i = 0; i < stash->aux_grad.size(); ++i) {
    d_logits[i] = aux_part * stash->aux_grad[i];
  }
  RouteTopKBackward(moe_.router, stash->logits, stash->routing, d_probs, absl::MakeSpan(d_logits));
  stash->d_logits = FromHostFloats(*ops_, d_logits, {tokens, experts});
  Tensor d_x = ops_->NewActivation({tokens, dx->dim(1)});
  gate_.BackwardInput(stash->d_logits, &d_x);
  ops_->Add(d_x, dx);
}

void MoeRouter::BackwardWeight(const Tensor& x, RouterStash* stash) {
  gate_.BackwardWeight(x, stash->d_logits);
  if (bias_ != nullptr) {
    bias_->CountMicroBatch(stash->routing.experts, stash->keep, stash->pad_rows);
  }
  *stash = RouterStash();
}

}  // namespace conveyor
