#include "model/transformer_layer.h"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "base/status_macros.h"
#include "model/context_shard.h"
#include "model/ring_attention.h"

namespace conveyor {
namespace {

std::string LayerName(int64_t index) { return "layers." + std::to_string(index); }

// --qk-layernorm's norm of one kind of head: head_dim wide, one gamma (and beta) shared
// by all heads of that kind; its gradient is a sum over every head, so over the TP
// ranks, which hold different heads.
std::optional<NormLayer> HeadNorm(const Ops* ops, ParameterStore* store, const ModelShape& s,
                                  const std::string& name) {
  if (!s.qk_layernorm || s.mla.enabled) return std::nullopt;  // MLA's norms are its latents'
  std::optional<NormLayer> norm(std::in_place, ops, store, name, s.head_dim, s.rms_norm,
                                s.norm_epsilon);
  std::vector<Parameter*> params;
  norm->AppendParameters(&params);
  for (Parameter* p : params) p->partial_over_heads = true;
  return norm;
}

// qkv (or its gradient), [rows, local qkv width], as one row per query group:
// [its query heads | its key head | its value head].
Tensor GroupRows(const Tensor& qkv, int64_t local_groups, const ModelShape& s) {
  return qkv.View(0, {qkv.dim(0) * local_groups, (s.heads_per_group() + 2) * s.head_dim});
}

// A buffer of rows * local groups * (heads_per_group + 1) head vectors as two matrices:
// every group's query heads (a row per group), then every group's key head.
struct QkHeads {
  Tensor queries, keys;
};
QkHeads SplitQkHeads(const Tensor& buffer, const ModelShape& s) {
  const int64_t query_width = s.heads_per_group() * s.head_dim;
  const int64_t group_rows = buffer.numel() / (query_width + s.head_dim);
  return {buffer.View(0, {group_rows, query_width}),
          buffer.View(group_rows * query_width, {group_rows, s.head_dim})};
}

// The fused qkv projection, absent under multi-latent attention.
std::optional<Linear> QkvProjection(const Ops* ops, ParameterStore* store, const ModelShape& s,
                                    const std::string& name, const TensorParallel& tp) {
  if (s.mla.enabled) return std::nullopt;
  return std::optional<Linear>(std::in_place, ops, store, name, s.hidden, s.qkv_width(),
                               s.has_qkv_bias(), s.init_std, LinearParallelism::kColumn,
                               Sharding::Block(0, s.qkv_width(), tp.size(), tp.rank()));
}

std::unique_ptr<MlaAttention> MlaProjections(const Ops* ops, ParameterStore* store,
                                             const ModelShape& s, const std::string& prefix,
                                             const TensorParallel& tp) {
  if (!s.mla.enabled) return nullptr;
  return std::make_unique<MlaAttention>(ops, store, prefix, s, tp);
}

// Copies the query and key heads out of GroupRows' rows, and back.
void GatherQkHeads(const Ops& ops, const Tensor& groups, const ModelShape& s, QkHeads* heads) {
  const int64_t query_width = s.heads_per_group() * s.head_dim;
  ops.CopyColumns(groups, 0, query_width, &heads->queries, 0);
  ops.CopyColumns(groups, query_width, s.head_dim, &heads->keys, 0);
}
void ScatterQkHeads(const Ops& ops, const QkHeads& heads, const ModelShape& s, Tensor* groups) {
  const int64_t query_width = s.heads_per_group() * s.head_dim;
  ops.CopyColumns(heads.queries, 0, query_width, groups, 0);
  ops.CopyColumns(heads.keys, 0, s.head_dim, groups, query_width);
}

}  // namespace

TransformerLayer::TransformerLayer(const Ops* ops, ParameterStore* store, const ModelShape& s,
                                   int64_t layer_index, const RopeTable* rope, uint64_t seed,
                                   const TensorParallel* tp, SelectiveRecompute selective)
    : ops_(ops),
      shape_(s),
      layer_index_(layer_index),
      rope_(rope),
      seed_(seed),
      tp_(tp),
      selective_(selective),
      local_groups_(s.query_groups / tp->size()),
      local_ffn_(s.ffn_hidden / tp->size()),
      ln1_(ops, store, LayerName(layer_index) + ".input_norm", s.hidden, s.rms_norm, s.norm_epsilon,
           tp->sequence_parallel()),
      qkv_(QkvProjection(ops, store, s, LayerName(layer_index) + ".attention.qkv", *tp)),
      mla_(MlaProjections(ops, store, s, LayerName(layer_index) + ".attention", *tp)),
      q_norm_(HeadNorm(ops, store, s, LayerName(layer_index) + ".attention.q_norm")),
      k_norm_(HeadNorm(ops, store, s, LayerName(layer_index) + ".attention.k_norm")),
      proj_(ops, store, LayerName(layer_index) + ".attention.proj", s.heads * s.value_head_dim(),
            s.hidden, s.linear_bias, s.output_init_std(), LinearParallelism::kRow,
            Sharding::Block(1, s.heads * s.value_head_dim(), tp->size(), tp->rank())),
      ln2_(ops, store, LayerName(layer_index) + ".post_attention_norm", s.hidden, s.rms_norm,
           s.norm_epsilon, tp->sequence_parallel()) {
  const std::string mlp = LayerName(layer_index) + ".mlp";
  if (s.moe.IsMoeLayer(layer_index)) {
    moe_ = std::make_unique<MoeLayer>(ops, store, mlp, s, *tp);
    return;
  }
  fc1_.emplace(ops, store, mlp + ".fc1", s.hidden, s.fc1_width(), s.linear_bias, s.init_std,
               LinearParallelism::kColumn, Fc1Sharding(s.ffn_hidden, s.swiglu, *tp));
  fc2_.emplace(ops, store, mlp + ".fc2", s.ffn_hidden, s.hidden, s.linear_bias,
               s.output_init_std(), LinearParallelism::kRow,
               Sharding::Block(1, s.ffn_hidden, tp->size(), tp->rank()));
}

CounterRng TransformerLayer::DropoutRng(DropoutSite site, int64_t iteration) const {
  uint64_t stream = MixStream(StreamId("dropout"), static_cast<uint64_t>(layer_index_));
  stream = MixStream(stream, static_cast<uint64_t>(site));
  return CounterRng(seed_, MixStream(stream, static_cast<uint64_t>(iteration)));
}

void TransformerLayer::HiddenDropout(const MicroBatchContext& mb, DropoutSite site,
                                     const Tensor& in, Tensor* out) const {
  DropoutRows(*ops_, DropoutRng(site, mb.iteration), mb.Dropout(shape_.hidden_dropout), mb,
              tp_->FirstShardRow(in.dim(0)), in, out);
}

void TransformerLayer::BiasDropoutAdd(const Linear* linear, const MicroBatchContext& mb,
                                      DropoutSite site, const Tensor& residual, Tensor* y) const {
  const int64_t first = tp_->FirstShardRow(y->dim(0));
  for (const RowRun& run : RowRuns(mb, first, y->dim(0))) {
    Tensor y_rows = RunRows(*y, run, first);
    const CounterRng rng = DropoutRng(site, mb.iteration);
    const float p = mb.Dropout(shape_.hidden_dropout);
    const uint64_t index = DropoutIndex(mb, run, shape_.hidden);
    const Tensor residual_rows = RunRows(residual, run, first);
    if (linear != nullptr) {
      linear->BiasDropoutAdd(rng, p, index, residual_rows, &y_rows);
    } else {
      ops_->BiasDropoutAdd(nullptr, rng, p, index, residual_rows, &y_rows);
    }
  }
}

Tensor TransformerLayer::QkvForward(LayerStash* stash) const {
  if (mla_ != nullptr) {
    stash->mla = std::make_shared<MlaStash>();
    return mla_->Forward(stash->ln1_full, stash->mla.get());
  }
  Tensor qkv = ops_->NewActivation({stash->ln1_full.dim(0), qkv_->local_out()});
  qkv_->Forward(stash->ln1_full, &qkv);
  return qkv;
}

Tensor TransformerLayer::QkvBackwardInput(LayerStash* stash) const {
  if (mla_ != nullptr) return mla_->BackwardInput(stash->d_qkv, stash->mla.get());
  Tensor d_ln1_partial = ops_->NewActivation({stash->d_qkv.dim(0), shape_.hidden});
  qkv_->BackwardInput(stash->d_qkv, &d_ln1_partial);
  return d_ln1_partial;
}

void TransformerLayer::ApplyRopeToQueriesAndKeys(const MicroBatchContext& mb, bool inverse,
                                                 Tensor* qkv) const {
  if (rope_ == nullptr) return;
  // qkv holds the micro-batch's whole sequence (gathered under sequence parallelism).
  ops_->RotateQueriesAndKeys(*rope_, AttentionShapeOf(mb), RowPositions(mb, 0, qkv->dim(0)),
                             inverse, qkv);
}

void TransformerLayer::NormQueriesAndKeys(Tensor* qkv, LayerStash* stash) const {
  if (!q_norm_.has_value()) return;
  Tensor groups = GroupRows(*qkv, local_groups_, shape_);
  stash->qk_in = ops_->NewActivation(
      {qkv->dim(0), local_groups_ * (shape_.heads_per_group() + 1) * shape_.head_dim});
  QkHeads in = SplitQkHeads(stash->qk_in, shape_);
  QkHeads out = SplitQkHeads(ops_->NewActivation(stash->qk_in.shape()), shape_);
  GatherQkHeads(*ops_, groups, shape_, &in);
  stash->q_norm = q_norm_->Forward(in.queries, &out.queries);
  stash->k_norm = k_norm_->Forward(in.keys, &out.keys);
  ScatterQkHeads(*ops_, out, shape_, &groups);
}

void TransformerLayer::NormQueriesAndKeysBackward(Tensor* d_qkv, LayerStash* stash) const {
  if (!q_norm_.has_value()) return;
  Tensor groups = GroupRows(*d_qkv, local_groups_, shape_);
  stash->d_qk = ops_->NewActivation(stash->qk_in.shape());
  QkHeads d_out = SplitQkHeads(stash->d_qk, shape_);
  const QkHeads in = SplitQkHeads(stash->qk_in, shape_);
  QkHeads d_in = SplitQkHeads(ops_->NewActivation(stash->qk_in.shape()), shape_);
  GatherQkHeads(*ops_, groups, shape_, &d_out);
  q_norm_->BackwardInput(d_out.queries, in.queries, stash->q_norm, &d_in.queries);
  k_norm_->BackwardInput(d_out.keys, in.keys, stash->k_norm, &d_in.keys);
  ScatterQkHeads(*ops_, d_in, shape_, &groups);
}

AttentionShape TransformerLayer::AttentionShapeOf(const MicroBatchContext& mb) const {
  return {mb.batch,        mb.local_seq(),         local_groups_, shape_.heads_per_group(),
          shape_.head_dim, shape_.value_head_dim()};
}

AttentionDropout TransformerLayer::AttentionDropoutOf(const MicroBatchContext& mb,
                                                      const CounterRng* rng) const {
  // This rank's heads start at tp_rank * local_heads among all heads.
  return {rng,          mb.Dropout(shape_.attention_dropout),
          mb.first_sample, tp_->rank() * local_groups_ * shape_.heads_per_group(),
          shape_.heads, /*sample_length=*/mb.seq};
}

int64_t TransformerLayer::Window() const { return shape_.WindowOf(layer_index_); }

float TransformerLayer::AttentionScale() const {
  if (mla_ != nullptr) return MlaSoftmaxScale(shape_);
  return 1.0f / std::sqrt(static_cast<float>(shape_.head_dim));
}

absl::Status TransformerLayer::NormsOut(const NormLayer& norm, const Tensor& in, Tensor* out,
                                        Tensor* full, NormStats* stats) const {
  *out = ops_->NewActivation({in.dim(0), shape_.hidden});
  *stats = norm.Forward(in, out);
  ASSIGN_OR_RETURN(*full, tp_->EnterForward(*out));
  return absl::OkStatus();
}

namespace {

// --reset-attention-mask's document starts of the whole sample held here, and the
// layer's sliding window.
AttentionMask DocumentMaskOf(const MicroBatchContext& mb, int64_t window) {
  AttentionMask mask;
  if (mb.documents != nullptr) mask.document_start = mb.documents->document_start;
  mask.window = window;
  return mask;
}

}  // namespace

absl::Status TransformerLayer::AttentionCore(const MicroBatchContext& mb, const Tensor& qkv,
                                             Tensor* attention, Tensor* ctx) const {
  const int64_t local_heads = local_groups_ * shape_.heads_per_group();
  const CounterRng probs_rng = DropoutRng(DropoutSite::kAttentionProbs, mb.iteration);
  *ctx = ops_->NewActivation({mb.tokens(), local_heads * shape_.value_head_dim()});
  if (mb.cp_size > 1) {
    return RingAttentionForward(*ops_, tp_->groups().cp, mb, AttentionShapeOf(mb), qkv,
                                AttentionScale(), AttentionDropoutOf(mb, &probs_rng), Window(),
                                attention, ctx);
  }
  ops_->AttentionForward(AttentionShapeOf(mb), qkv, AttentionScale(),
                         AttentionDropoutOf(mb, &probs_rng), DocumentMaskOf(mb, Window()),
                         attention, ctx);
  return absl::OkStatus();
}

absl::Status TransformerLayer::AttentionCoreBackward(const MicroBatchContext& mb,
                                                     const Tensor& d_ctx,
                                                     LayerStash* stash) const {
  const CounterRng probs_rng = DropoutRng(DropoutSite::kAttentionProbs, mb.iteration);
  stash->d_qkv = ops_->NewActivation({mb.tokens(), shape_.qkv_width() / tp_->size()});
  if (mb.cp_size > 1) {
    return RingAttentionBackward(*ops_, tp_->groups().cp, mb, AttentionShapeOf(mb), stash->qkv,
                                 stash->attention, stash->ctx, d_ctx, AttentionScale(),
                                 AttentionDropoutOf(mb, &probs_rng), Window(), &stash->d_qkv);
  }
  ops_->AttentionBackward(AttentionShapeOf(mb), stash->qkv, stash->attention, stash->ctx, d_ctx,
                          AttentionScale(), AttentionDropoutOf(mb, &probs_rng),
                          DocumentMaskOf(mb, Window()), &stash->d_qkv);
  return absl::OkStatus();
}

void TransformerLayer::MlpIn(const Tensor& ln2_full, Tensor* fc1_out, Tensor* act) const {
  const int64_t rows = ln2_full.dim(0);
  *fc1_out = ops_->NewActivation({rows, fc1_->local_out()});
  *act = ops_->NewActivation({rows, local_ffn_});
  if (shape_.swiglu) {
    fc1_->Forward(ln2_full, fc1_out);
    ops_->SwigluForward(*fc1_out, act);
  } else if (shape_.squared_relu) {
    fc1_->Forward(ln2_full, fc1_out);
    ops_->SquaredReluForward(*fc1_out, act);
  } else {
    fc1_->ForwardGelu(ln2_full, fc1_out, act);
  }
}

absl::StatusOr<Tensor> TransformerLayer::MlpForward(const MicroBatchContext& mb,
                                                    LayerStash* stash) const {
  if (moe_ != nullptr) {
    stash->moe = std::make_shared<MoeStash>();
    ASSIGN_OR_RETURN(Tensor moe_out, moe_->Forward(stash->ln2_full, mb, stash->moe.get()));
    return tp_->ExitForward(std::move(moe_out));
  }
  MlpIn(stash->ln2_full, &stash->fc1_out, &stash->act);
  Tensor fc2_partial = ops_->NewActivation({mb.tokens(), shape_.hidden});
  fc2_->Forward(stash->act, &fc2_partial);
  return tp_->ExitForward(std::move(fc2_partial));
}

absl::Status TransformerLayer::MlpBackwardInput(const Tensor& d_out, LayerStash* stash) const {
  if (moe_ != nullptr) {
    ASSIGN_OR_RETURN(const Tensor d_out_full, tp_->ExitBackward(d_out));
    ASSIGN_OR_RETURN(Tensor d_ln2_partial, moe_->BackwardInput(stash->ln2_full, d_out_full,
                                                                aux_loss_scale_, stash->moe.get()));
    ASSIGN_OR_RETURN(stash->d_ln2, tp_->EnterBackward(std::move(d_ln2_partial)));
    return absl::OkStatus();
  }
  const int64_t rows = stash->ln2_full.dim(0);
  ASSIGN_OR_RETURN(stash->d_fc2_full, tp_->ExitBackward(d_out));
  stash->d_fc1 = ops_->NewActivation({rows, fc1_->local_out()});
  if (shape_.swiglu || shape_.squared_relu) {
    Tensor d_act = ops_->NewActivation({rows, local_ffn_});
    fc2_->BackwardInput(stash->d_fc2_full, &d_act);
    if (shape_.swiglu) {
      ops_->SwigluBackward(stash->fc1_out, d_act, &stash->d_fc1);
    } else {
      ops_->SquaredReluBackward(stash->fc1_out, d_act, &stash->d_fc1);
    }
  } else {
    fc2_->BackwardInputGelu(stash->d_fc2_full, stash->fc1_out, &stash->d_fc1);
  }
  Tensor d_ln2_partial = ops_->NewActivation({rows, shape_.hidden});
  fc1_->BackwardInput(stash->d_fc1, &d_ln2_partial);
  ASSIGN_OR_RETURN(stash->d_ln2, tp_->EnterBackward(std::move(d_ln2_partial)));
  return absl::OkStatus();
}

absl::StatusOr<Tensor> TransformerLayer::Forward(const Tensor& x, const MicroBatchContext& mb,
                                                 LayerStash* stash) const {
  const int64_t rows = mb.tokens();
  stash->x = x;

  // Attention block.
  RETURN_IF_ERROR(NormsOut(ln1_, x, &stash->ln1_out, &stash->ln1_full, &stash->ln1));
  stash->qkv = QkvForward(stash);
  NormQueriesAndKeys(&stash->qkv, stash);
  ApplyRopeToQueriesAndKeys(mb, /*inverse=*/false, &stash->qkv);
  RETURN_IF_ERROR(AttentionCore(mb, stash->qkv, &stash->attention, &stash->ctx));

  Tensor proj_partial = ops_->NewActivation({rows, shape_.hidden});
  proj_.Forward(stash->ctx, &proj_partial);
  ASSIGN_OR_RETURN(stash->x1, tp_->ExitForward(std::move(proj_partial)));
  BiasDropoutAdd(&proj_, mb, DropoutSite::kAttentionOut, x, &stash->x1);

  // MLP block.
  RETURN_IF_ERROR(NormsOut(ln2_, stash->x1, &stash->ln2_out, &stash->ln2_full, &stash->ln2));
  ASSIGN_OR_RETURN(Tensor out, MlpForward(mb, stash));
  BiasDropoutAdd(fc2_.has_value() ? &*fc2_ : nullptr, mb, DropoutSite::kMlpOut, stash->x1, &out);

  // Selective recomputation: keep only what is expensive to recompute.
  for (const StashTensor& t : kForwardStash) {
    if (DroppedAfterForward(t, selective_)) stash->*t.tensor = Tensor();
  }
  return out;
}

absl::Status TransformerLayer::RecomputeDropped(const MicroBatchContext& mb,
                                                LayerStash* stash) const {
  if (selective_.layernorm) {
    RETURN_IF_ERROR(NormsOut(ln1_, stash->x, &stash->ln1_out, &stash->ln1_full, &stash->ln1));
    RETURN_IF_ERROR(NormsOut(ln2_, stash->x1, &stash->ln2_out, &stash->ln2_full, &stash->ln2));
  }
  if (selective_.mlp && moe_ == nullptr) MlpIn(stash->ln2_full, &stash->fc1_out, &stash->act);
  if (selective_.core_attn) {
    Tensor ctx;  // already kept; recomputed alongside the probabilities and dropped
    RETURN_IF_ERROR(AttentionCore(mb, stash->qkv, &stash->attention, &ctx));
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> TransformerLayer::BackwardInput(const Tensor& dy,
                                                       const MicroBatchContext& mb,
                                                       LayerStash* stash) const {
  const int64_t rows = mb.tokens();
  const int64_t local_rows = dy.dim(0);
  const int64_t local_heads = local_groups_ * shape_.heads_per_group();
  RETURN_IF_ERROR(RecomputeDropped(mb, stash));

  // MLP block.
  Tensor d_fc2 = ops_->NewActivation({local_rows, shape_.hidden});
  HiddenDropout(mb, DropoutSite::kMlpOut, dy, &d_fc2);
  RETURN_IF_ERROR(MlpBackwardInput(d_fc2, stash));
  Tensor d_x1 = ops_->NewActivation({local_rows, shape_.hidden});
  ln2_.BackwardInput(stash->d_ln2, stash->x1, stash->ln2, &d_x1);
  ops_->Add(dy, &d_x1);  // residual

  // Attention block.
  Tensor d_proj = ops_->NewActivation({local_rows, shape_.hidden});
  HiddenDropout(mb, DropoutSite::kAttentionOut, d_x1, &d_proj);
  ASSIGN_OR_RETURN(stash->d_proj_full, tp_->ExitBackward(d_proj));
  Tensor d_ctx = ops_->NewActivation({rows, local_heads * shape_.value_head_dim()});
  proj_.BackwardInput(stash->d_proj_full, &d_ctx);
  RETURN_IF_ERROR(AttentionCoreBackward(mb, d_ctx, stash));
  ApplyRopeToQueriesAndKeys(mb, /*inverse=*/true, &stash->d_qkv);
  NormQueriesAndKeysBackward(&stash->d_qkv, stash);
  ASSIGN_OR_RETURN(stash->d_ln1, tp_->EnterBackward(QkvBackwardInput(stash)));
  Tensor dx = ops_->NewActivation({local_rows, shape_.hidden});
  ln1_.BackwardInput(stash->d_ln1, stash->x, stash->ln1, &dx);
  ops_->Add(d_x1, &dx);  // residual

  // Only the weight gradients need the rest of the stash now.
  for (const StashTensor& t : kForwardStash) {
    if (!t.kept_for_weight) stash->*t.tensor = Tensor();
  }
  return dx;
}

std::vector<Parameter*> TransformerLayer::Parameters() const {
  std::vector<Parameter*> params;
  ln1_.AppendParameters(&params);
  if (mla_ != nullptr) {
    mla_->AppendParameters(&params);
  } else {
    qkv_->AppendParameters(&params);
  }
  if (q_norm_.has_value()) {
    q_norm_->AppendParameters(&params);
    k_norm_->AppendParameters(&params);
  }
  proj_.AppendParameters(&params);
  ln2_.AppendParameters(&params);
  if (moe_ != nullptr) {
    moe_->AppendParameters(&params);
  } else {
    fc1_->AppendParameters(&params);
    fc2_->AppendParameters(&params);
  }
  return params;
}

void TransformerLayer::MlpBackwardWeight(LayerStash* stash) {
  if (moe_ != nullptr) {
    moe_->BackwardWeight(stash->moe.get());
    return;
  }
  fc2_->BackwardWeight(stash->act, stash->d_fc2_full);
  fc1_->BackwardWeight(stash->ln2_full, stash->d_fc1);
}

void TransformerLayer::BackwardWeight(LayerStash* stash) {
  MlpBackwardWeight(stash);
  ln2_.BackwardWeight(stash->d_ln2, stash->x1, stash->ln2);
  proj_.BackwardWeight(stash->ctx, stash->d_proj_full);
  if (q_norm_.has_value()) {
    const QkHeads d_out = SplitQkHeads(stash->d_qk, shape_);
    const QkHeads in = SplitQkHeads(stash->qk_in, shape_);
    q_norm_->BackwardWeight(d_out.queries, in.queries, stash->q_norm);
    k_norm_->BackwardWeight(d_out.keys, in.keys, stash->k_norm);
  }
  if (mla_ != nullptr) {
    mla_->BackwardWeight(stash->ln1_full, *stash->mla);
  } else {
    qkv_->BackwardWeight(stash->ln1_full, stash->d_qkv);
  }
  ln1_.BackwardWeight(stash->d_ln1, stash->x, stash->ln1);
  *stash = LayerStash();
}

}  // namespace conveyor
