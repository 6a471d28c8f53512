#include "model/mla_attention.h"

#include <cassert>
#include <cmath>

namespace conveyor {
namespace {

// A replicated parameter whose gradient on each rank covers only that rank's heads.
void MarkPartialOverHeads(std::vector<Parameter*> params) {
  for (Parameter* p : params) p->partial_over_heads = true;
}

std::optional<NormLayer> LatentNorm(const Ops* ops, ParameterStore* store, const std::string& name,
                                    int64_t width, const ModelShape& s) {
  if (!s.qk_layernorm || width == 0) return std::nullopt;
  std::optional<NormLayer> norm(std::in_place, ops, store, name, width, s.rms_norm, s.norm_epsilon);
  std::vector<Parameter*> params;
  norm->AppendParameters(&params);
  MarkPartialOverHeads(params);
  return norm;
}

// A projection of no bias (Megatron builds every MLA projection but the output's without
// one): replicated, or column-parallel by heads when `heads_split`.
Linear Projection(const Ops* ops, ParameterStore* store, const std::string& name, int64_t in,
                  int64_t out, const ModelShape& s, const TensorParallel& tp, bool heads_split) {
  Linear linear(
      ops, store, name, in, out, /*bias=*/false, s.init_std, LinearParallelism::kColumn,
      heads_split ? Sharding::Block(0, out, tp.size(), tp.rank()) : Sharding::Replicated());
  if (!heads_split) {
    std::vector<Parameter*> params;
    linear.AppendParameters(&params);
    MarkPartialOverHeads(params);
  }
  return linear;
}

std::optional<Linear> OptionalProjection(bool present, const Ops* ops, ParameterStore* store,
                                         const std::string& name, int64_t in, int64_t out,
                                         const ModelShape& s, const TensorParallel& tp,
                                         bool heads_split) {
  if (!present) return std::nullopt;
  return Projection(ops, store, name, in, out, s, tp, heads_split);
}

// y = norm(x), or x itself without a norm.
Tensor NormOrSame(const Ops& ops, const std::optional<NormLayer>& norm, const Tensor& x,
                  NormStats* stats) {
  if (!norm.has_value()) return x;
  Tensor y = ops.NewActivation(x.shape());
  *stats = norm->Forward(x, &y);
  return y;
}

Tensor NormBackwardOrSame(const Ops& ops, const std::optional<NormLayer>& norm, const Tensor& dy,
                          const Tensor& x, const NormStats& stats) {
  if (!norm.has_value()) return dy;
  Tensor dx = ops.NewActivation(x.shape());
  norm->BackwardInput(dy, x, stats, &dx);
  return dx;
}

}  // namespace

float MlaSoftmaxScale(const ModelShape& s) {
  double scale = 1.0 / std::sqrt(static_cast<double>(s.mla.q_head_dim()));
  if (s.rope_scaling.kind == RopeScalingKind::kYarn) {
    const double m = YarnMscale(s.rope_scaling.factor, s.rope_scaling.mscale_all_dim);
    scale *= m * m;
  }
  return static_cast<float>(scale);
}

MlaAttention::MlaAttention(const Ops* ops, ParameterStore* store, const std::string& prefix,
                           const ModelShape& s, const TensorParallel& tp)
    : ops_(ops),
      mla_(s.mla),
      local_heads_(s.heads / tp.size()),
      q_down_(OptionalProjection(s.mla.q_lora_rank > 0, ops, store, prefix + ".q_down", s.hidden,
                                 s.mla.q_lora_rank, s, tp, /*heads_split=*/false)),
      q_norm_(LatentNorm(ops, store, prefix + ".q_latent_norm", s.mla.q_lora_rank, s)),
      q_up_(OptionalProjection(s.mla.q_lora_rank > 0, ops, store, prefix + ".q_up",
                               s.mla.q_lora_rank, s.heads * s.mla.q_head_dim(), s, tp, true)),
      q_(OptionalProjection(s.mla.q_lora_rank == 0, ops, store, prefix + ".q", s.hidden,
                            s.heads * s.mla.q_head_dim(), s, tp, true)),
      kv_down_(Projection(ops, store, prefix + ".kv_down", s.hidden,
                          s.mla.kv_lora_rank + s.mla.qk_pos_emb_head_dim, s, tp, false)),
      kv_norm_(LatentNorm(ops, store, prefix + ".kv_latent_norm", s.mla.kv_lora_rank, s)),
      kv_up_(Projection(ops, store, prefix + ".kv_up", s.mla.kv_lora_rank,
                        s.heads * (s.mla.qk_head_dim + s.mla.v_head_dim), s, tp, true)) {
  // The layer's attention shape reads these (ModelShape::UseMla).
  assert(s.query_groups == s.heads && s.head_dim == s.mla.q_head_dim());
}

Tensor MlaAttention::QueryHeads(const Tensor& x, MlaStash* stash) const {
  const int64_t rows = x.dim(0);
  Tensor q = ops_->NewActivation({rows, local_heads_ * mla_.q_head_dim()});
  if (q_.has_value()) {
    q_->Forward(x, &q);
    return q;
  }
  stash->q_latent = ops_->NewActivation({rows, mla_.q_lora_rank});
  q_down_->Forward(x, &stash->q_latent);
  stash->q_normed = NormOrSame(*ops_, q_norm_, stash->q_latent, &stash->q_norm);
  q_up_->Forward(stash->q_normed, &q);
  return q;
}

Tensor MlaAttention::Forward(const Tensor& x, MlaStash* stash) const {
  const int64_t rows = x.dim(0), latent = mla_.kv_lora_rank;
  const Tensor q = QueryHeads(x, stash);
  Tensor kv_down = ops_->NewActivation({rows, latent + mla_.qk_pos_emb_head_dim});
  kv_down_.Forward(x, &kv_down);
  stash->kv_latent = ops_->NewActivation({rows, latent});
  ops_->CopyColumns(kv_down, 0, latent, &stash->kv_latent, 0);
  stash->kv_normed = NormOrSame(*ops_, kv_norm_, stash->kv_latent, &stash->kv_norm);
  Tensor kv = ops_->NewActivation({rows, local_heads_ * (mla_.qk_head_dim + mla_.v_head_dim)});
  kv_up_.Forward(stash->kv_normed, &kv);
  Tensor qkv =
      ops_->NewActivation({rows, local_heads_ * (2 * mla_.q_head_dim() + mla_.v_head_dim)});
  Pack(q, kv_down, kv, &qkv);
  return qkv;
}

void MlaAttention::Pack(const Tensor& q, const Tensor& kv_down, const Tensor& kv,
                        Tensor* qkv) const {
  const int64_t dn = mla_.qk_head_dim, dr = mla_.qk_pos_emb_head_dim, dv = mla_.v_head_dim;
  const int64_t dqk = dn + dr, head = 2 * dqk + dv;
  for (int64_t h = 0; h < local_heads_; ++h) {
    ops_->CopyColumns(q, h * dqk + dn, dr, qkv, h * head);                   // q_rope
    ops_->CopyColumns(q, h * dqk, dn, qkv, h * head + dr);                   // q_nope
    ops_->CopyColumns(kv_down, mla_.kv_lora_rank, dr, qkv, h * head + dqk);  // k_rope
    ops_->CopyColumns(kv, h * (dn + dv), dn, qkv, h * head + dqk + dr);      // k_nope
    ops_->CopyColumns(kv, h * (dn + dv) + dn, dv, qkv, h * head + 2 * dqk);  // v
  }
}

void MlaAttention::Unpack(const Tensor& d_qkv, Tensor* d_q, Tensor* d_kv_down, Tensor* d_kv) const {
  const int64_t dn = mla_.qk_head_dim, dr = mla_.qk_pos_emb_head_dim, dv = mla_.v_head_dim;
  const int64_t dqk = dn + dr, head = 2 * dqk + dv, rows = d_qkv.dim(0);
  // k_rope's gradient: the sum of its copies' over the heads.
  Tensor d_k_rope = ops_->NewActivation({rows, dr});
  Tensor one_head = ops_->NewActivation({rows, dr});
  for (int64_t h = 0; h < local_heads_; ++h) {
    ops_->CopyColumns(d_qkv, h * head, dr, d_q, h * dqk + dn);
    ops_->CopyColumns(d_qkv, h * head + dr, dn, d_q, h * dqk);
    ops_->CopyColumns(d_qkv, h * head + dqk, dr, h == 0 ? &d_k_rope : &one_head, 0);
    if (h > 0) ops_->Add(one_head, &d_k_rope);
    ops_->CopyColumns(d_qkv, h * head + dqk + dr, dn, d_kv, h * (dn + dv));
    ops_->CopyColumns(d_qkv, h * head + 2 * dqk, dv, d_kv, h * (dn + dv) + dn);
  }
  ops_->CopyColumns(d_k_rope, 0, dr, d_kv_down, mla_.kv_lora_rank);
}

Tensor MlaAttention::QueryBackward(MlaStash* stash) const {
  const int64_t rows = stash->d_q.dim(0);
  Tensor dx = ops_->NewActivation({rows, q_.has_value() ? q_->local_in() : q_down_->local_in()});
  if (q_.has_value()) {
    q_->BackwardInput(stash->d_q, &dx);
    return dx;
  }
  stash->d_q_normed = ops_->NewActivation({rows, mla_.q_lora_rank});
  q_up_->BackwardInput(stash->d_q, &stash->d_q_normed);
  stash->d_q_latent =
      NormBackwardOrSame(*ops_, q_norm_, stash->d_q_normed, stash->q_latent, stash->q_norm);
  q_down_->BackwardInput(stash->d_q_latent, &dx);
  return dx;
}

Tensor MlaAttention::BackwardInput(const Tensor& d_qkv, MlaStash* stash) const {
  const int64_t rows = d_qkv.dim(0), latent = mla_.kv_lora_rank;
  stash->d_q = ops_->NewActivation({rows, local_heads_ * mla_.q_head_dim()});
  stash->d_kv = ops_->NewActivation({rows, local_heads_ * (mla_.qk_head_dim + mla_.v_head_dim)});
  stash->d_kv_down = ops_->NewActivation({rows, latent + mla_.qk_pos_emb_head_dim});
  Unpack(d_qkv, &stash->d_q, &stash->d_kv_down, &stash->d_kv);
  stash->d_kv_normed = ops_->NewActivation({rows, latent});
  kv_up_.BackwardInput(stash->d_kv, &stash->d_kv_normed);
  const Tensor d_kv_latent =
      NormBackwardOrSame(*ops_, kv_norm_, stash->d_kv_normed, stash->kv_latent, stash->kv_norm);
  ops_->CopyColumns(d_kv_latent, 0, latent, &stash->d_kv_down, 0);
  Tensor dx = QueryBackward(stash);
  Tensor dx_kv = ops_->NewActivation(dx.shape());
  kv_down_.BackwardInput(stash->d_kv_down, &dx_kv);
  ops_->Add(dx_kv, &dx);
  return dx;
}

void MlaAttention::BackwardWeight(const Tensor& x, const MlaStash& stash) {
  kv_down_.BackwardWeight(x, stash.d_kv_down);
  if (kv_norm_.has_value()) {
    kv_norm_->BackwardWeight(stash.d_kv_normed, stash.kv_latent, stash.kv_norm);
  }
  kv_up_.BackwardWeight(stash.kv_normed, stash.d_kv);
  if (q_.has_value()) {
    q_->BackwardWeight(x, stash.d_q);
    return;
  }
  q_down_->BackwardWeight(x, stash.d_q_latent);
  if (q_norm_.has_value()) q_norm_->BackwardWeight(stash.d_q_normed, stash.q_latent, stash.q_norm);
  q_up_->BackwardWeight(stash.q_normed, stash.d_q);
}

void MlaAttention::AppendParameters(std::vector<Parameter*>* out) const {
  if (q_.has_value()) {
    q_->AppendParameters(out);
  } else {
    q_down_->AppendParameters(out);
    if (q_norm_.has_value()) q_norm_->AppendParameters(out);
    q_up_->AppendParameters(out);
  }
  kv_down_.AppendParameters(out);
  if (kv_norm_.has_value()) kv_norm_->AppendParameters(out);
  kv_up_.AppendParameters(out);
}

}  // namespace conveyor
