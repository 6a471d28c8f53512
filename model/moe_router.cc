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
  return FromHostFloats(ops, values, std::move(shape), ops.compute_dtype());
}

Tensor FromHostFloats(const Ops& ops, const std::vector<float>& values, std::vector<int64_t> shape,
                      DType dtype) {
  Tensor host = Tensor::Zeros(std::move(shape), MemoryCategory::kActivations);
  std::copy(values.begin(), values.end(), host.data());
  return ops.CastTo(host.To(ops.device(), MemoryCategory::kActivations), dtype);
}

MoeRouter::MoeRouter(const Ops* ops, ParameterStore* store, const std::string& name, int64_t hidden,
                     const MoeShape& moe, float init_std, const TensorParallel& tp)
    : ops_(ops),
      moe_(moe),
      tp_size_(tp.size()),
      cp_(tp.groups().cp),
      gate_dtype_(moe.router_fp32 ? DType::kFloat32 : ops->compute_dtype()),
      weight_(store->Add(name + ".weight", {moe.experts(), hidden}, {InitKind::kNormal, init_std},
                         true, Sharding::Replicated())) {
  // The GEMM reads the compute copy (bf16 under --bf16), widened under --moe-router-dtype
  // fp32 as Megatron widens its bf16 weight.
  weight_->read_in_compute_type = true;
  // Validation asks for --sequence-parallel with TP > 1, so this sums its parts over TP.
  weight_->sequence_parallel = tp.sequence_parallel();
  if (moe.expert_bias) bias_ = std::make_unique<ExpertBias>(name + ".expert_bias", moe.experts());
  if (moe.global_aux_loss_coeff > 0) {
    global_load_ = std::make_unique<MoeGlobalLoad>(tp.groups().dp);
  }
}

absl::Status MoeRouter::Forward(const Tensor& x, const MicroBatchContext& mb,
                                RouterStash* stash) const {
  const int64_t tokens = x.dim(0), experts = moe_.experts(), topk = moe_.router.topk;
  Tensor logits = Tensor::Uninitialized({tokens, experts}, MemoryCategory::kActivations,
                                        gate_dtype_, ops_->device());
  ops_->LinearForward(ForGate(x), ForGate(weight_->compute_value()), nullptr, &logits);
  stash->logits = ToHostFloats(*ops_, logits);
  ASSIGN_OR_RETURN(const std::vector<float> all,
                   GatherMicroBatchRows(mb, *cp_, stash->logits, experts));
  ASSIGN_OR_RETURN(const RouterStash whole, RouteMicroBatch(all, mb));
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
  stash->losses = whole.losses;
  return absl::OkStatus();
}

absl::StatusOr<RouterStash> MoeRouter::RouteMicroBatch(const std::vector<float>& logits,
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
  // Megatron computes no auxiliary loss in evaluation.
  if (mb.training) RETURN_IF_ERROR(AddAuxiliaryLosses(logits, mb, &whole));
  return whole;
}

absl::Status MoeRouter::AddAuxiliaryLosses(const std::vector<float>& logits,
                                           const MicroBatchContext& mb, RouterStash* whole) const {
  const MoeShape& m = moe_;
  if (m.aux_loss_coeff <= 0 && m.seq_aux_loss_coeff <= 0 && m.global_aux_loss_coeff <= 0 &&
      m.z_loss_coeff <= 0) {
    return absl::OkStatus();
  }
  whole->aux_grad.assign(logits.size(), 0.0f);
  const absl::Span<float> grad = absl::MakeSpan(whole->aux_grad);
  RouterLosses& losses = whole->losses;
  if (m.aux_loss_coeff > 0) {
    losses.load_balancing = LoadBalancingLoss(m.router, logits, 1, m.aux_loss_coeff, grad);
  }
  if (m.seq_aux_loss_coeff > 0) {
    // The loss of each sequence, averaged over the micro-batch's sequences.
    losses.seq_load_balancing =
        LoadBalancingLoss(m.router, logits, mb.batch, m.seq_aux_loss_coeff, grad);
  }
  if (m.global_aux_loss_coeff > 0) {
    ASSIGN_OR_RETURN(losses.global_load_balancing,
                     global_load_->Loss(m.router, mb, logits, m.global_aux_loss_coeff, grad));
  }
  if (m.z_loss_coeff > 0) losses.z = ZLoss(m.experts(), logits, m.z_loss_coeff, grad);
  return absl::OkStatus();
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
  stash->d_logits = FromHostFloats(*ops_, d_logits, {tokens, experts}, gate_dtype_);
  const int64_t hidden = dx->dim(1);
  Tensor d_x = Tensor::Uninitialized({tokens, hidden}, MemoryCategory::kActivations, gate_dtype_,
                                     ops_->device());
  ops_->Gemm(false, false, tokens, hidden, experts, 1.0f, stash->d_logits,
             ForGate(weight_->compute_value()), 0.0f, &d_x);
  ops_->Add(ops_->CastTo(d_x, ops_->compute_dtype()), dx);
}

void MoeRouter::BackwardWeight(const Tensor& x, RouterStash* stash) {
  ops_->LinearWeightGrad(ForGate(x), stash->d_logits, &weight_->grad, nullptr);
  if (bias_ != nullptr) {
    bias_->CountMicroBatch(stash->routing.experts, stash->keep, stash->pad_rows);
  }
  *stash = RouterStash();
}

}  // namespace conveyor
