#include "model/moe_router.h"

#include <algorithm>

namespace conveyor {
namespace {

// A device tensor's values as a host fp32 array.
std::vector<float> ToHostFloats(const Ops& ops, const Tensor& t) {
  const Tensor host = ops.CastTo(t, DType::kFloat32).To(Device::kCpu, MemoryCategory::kActivations);
  return std::vector<float>(host.data(), host.data() + host.numel());
}

// A host fp32 array as a device tensor of the compute type.
Tensor FromHostFloats(const Ops& ops, const std::vector<float>& values,
                      std::vector<int64_t> shape) {
  Tensor host = Tensor::Zeros(std::move(shape), MemoryCategory::kActivations);
  std::copy(values.begin(), values.end(), host.data());
  return ops.CastTo(host.To(ops.device(), MemoryCategory::kActivations), ops.compute_dtype());
}

}  // namespace

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

void MoeRouter::Forward(const Tensor& x, const MicroBatchContext& mb, RouterStash* stash) const {
  const int64_t tokens = x.dim(0), experts = moe_.experts();
  Tensor logits = ops_->NewActivation({tokens, experts});
  gate_.Forward(x, &logits);
  stash->logits = ToHostFloats(*ops_, logits);
  stash->routing = RouteTopK(moe_.router, stash->logits,
                             bias_ != nullptr ? bias_->values() : absl::Span<const float>());
  stash->keep.clear();
  if (moe_.drops_tokens()) {
    const int64_t capacity =
        ExpertCapacity(tokens, moe_.router.topk, experts, moe_.capacity_factor);
    stash->keep = CapacityKeep(moe_.router, stash->routing, capacity, moe_.drop_policy);
  }
  stash->aux_grad.clear();
  stash->load_balancing_loss = stash->z_loss = 0.0;
  if (!mb.training) return;  // Megatron computes no auxiliary loss in evaluation
  const bool balancing = moe_.balancing != MoeLoadBalancingType::kNone && moe_.aux_loss_coeff > 0;
  const bool z = moe_.z_loss_coeff > 0;
  if (!balancing && !z) return;
  stash->aux_grad.assign(stash->logits.size(), 0.0f);
  if (balancing) {
    // seq_aux_loss: the loss of each sequence, averaged over the micro-batch's sequences.
    const int64_t groups = moe_.balancing == MoeLoadBalancingType::kSeqAuxLoss ? mb.batch : 1;
    stash->load_balancing_loss = LoadBalancingLoss(
        moe_.router, stash->logits, groups, moe_.aux_loss_coeff, absl::MakeSpan(stash->aux_grad));
  }
  if (z) {
    stash->z_loss =
        ZLoss(experts, stash->logits, moe_.z_loss_coeff, absl::MakeSpan(stash->aux_grad));
  }
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
    bias_->CountMicroBatch(stash->routing.experts, stash->keep, PaddedExpertRows(moe_, x.dim(0)));
  }
  *stash = RouterStash();
}

}  // namespace conveyor
