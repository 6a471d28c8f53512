#include "model/transformer_layer.h"

#include <cmath>
#include <string>

#include "base/status_macros.h"

namespace conveyor {
namespace {

std::string LayerName(int64_t index) { return "layers." + std::to_string(index); }

// SwiGLU's fc1 rows are [gate | up]; a rank holds its slice of each half, so that the
// activation can pair them locally.
Sharding Fc1Sharding(const ModelShape& s, const TensorParallel& tp) {
  const int64_t slice = s.ffn_hidden / tp.size();
  const int64_t start = tp.rank() * slice;
  if (!s.swiglu) return {0, {{start, slice}}};
  return {0, {{start, slice}, {s.ffn_hidden + start, slice}}};
}

float OutputProjectionStd(const ModelShape& s) {
  // Megatron's scaled init, std / sqrt(2 * num_layers), keeps the residual stream's
  // variance from growing with depth.
  return s.init_std / std::sqrt(2.0f * static_cast<float>(s.num_layers));
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
      qkv_(ops, store, LayerName(layer_index) + ".attention.qkv", s.hidden, s.qkv_width(),
           s.has_qkv_bias(), s.init_std, LinearParallelism::kColumn,
           Sharding::Block(0, s.qkv_width(), tp->size(), tp->rank())),
      proj_(ops, store, LayerName(layer_index) + ".attention.proj", s.heads * s.head_dim, s.hidden,
            s.linear_bias, OutputProjectionStd(s), LinearParallelism::kRow,
            Sharding::Block(1, s.heads * s.head_dim, tp->size(), tp->rank())),
      ln2_(ops, store, LayerName(layer_index) + ".post_attention_norm", s.hidden, s.rms_norm,
           s.norm_epsilon, tp->sequence_parallel()),
      fc1_(ops, store, LayerName(layer_index) + ".mlp.fc1", s.hidden, s.fc1_width(), s.linear_bias,
           s.init_std, LinearParallelism::kColumn, Fc1Sharding(s, *tp)),
      fc2_(ops, store, LayerName(layer_index) + ".mlp.fc2", s.ffn_hidden, s.hidden, s.linear_bias,
           OutputProjectionStd(s), LinearParallelism::kRow,
           Sharding::Block(1, s.ffn_hidden, tp->size(), tp->rank())) {}

CounterRng TransformerLayer::DropoutRng(DropoutSite site, int64_t iteration) const {
  uint64_t stream = MixStream(StreamId("dropout"), static_cast<uint64_t>(layer_index_));
  stream = MixStream(stream, static_cast<uint64_t>(site));
  return CounterRng(seed_, MixStream(stream, static_cast<uint64_t>(iteration)));
}

uint64_t TransformerLayer::HiddenDropoutIndex(const MicroBatchContext& mb,
                                              int64_t local_rows) const {
  const int64_t first_row = tp_->sequence_parallel() ? tp_->rank() * local_rows : 0;
  return static_cast<uint64_t>((mb.first_sample * mb.seq + first_row) * shape_.hidden);
}

void TransformerLayer::ApplyRopeToQueriesAndKeys(const MicroBatchContext& mb, bool inverse,
                                                 Tensor* qkv) const {
  if (rope_ != nullptr) ops_->RotateQueriesAndKeys(*rope_, AttentionShapeOf(mb), inverse, qkv);
}

AttentionShape TransformerLayer::AttentionShapeOf(const MicroBatchContext& mb) const {
  return {mb.batch, mb.seq, local_groups_, shape_.heads_per_group(), shape_.head_dim};
}

AttentionDropout TransformerLayer::AttentionDropoutOf(const MicroBatchContext& mb,
                                                      const CounterRng* rng) const {
  // This rank's heads start at tp_rank * local_heads among all heads.
  return {rng, mb.Dropout(shape_.attention_dropout), mb.first_sample,
          tp_->rank() * local_groups_ * shape_.heads_per_group(), shape_.heads};
}

float TransformerLayer::AttentionScale() const {
  return 1.0f / std::sqrt(static_cast<float>(shape_.head_dim));
}

absl::Status TransformerLayer::NormsOut(const NormLayer& norm, const Tensor& in, Tensor* out,
                                        Tensor* full, NormStats* stats) const {
  *out = ops_->NewActivation({in.dim(0), shape_.hidden});
  *stats = norm.Forward(in, out);
  ASSIGN_OR_RETURN(*full, tp_->EnterForward(*out));
  return absl::OkStatus();
}

void TransformerLayer::AttentionCore(const MicroBatchContext& mb, const Tensor& qkv,
                                     Tensor* attention, Tensor* ctx) const {
  const int64_t local_heads = local_groups_ * shape_.heads_per_group();
  const CounterRng probs_rng = DropoutRng(DropoutSite::kAttentionProbs, mb.iteration);
  *ctx = ops_->NewActivation({mb.tokens(), local_heads * shape_.head_dim});
  ops_->AttentionForward(AttentionShapeOf(mb), qkv, AttentionScale(),
                         AttentionDropoutOf(mb, &probs_rng), attention, ctx);
}

void TransformerLayer::MlpIn(const Tensor& ln2_full, Tensor* fc1_out, Tensor* act) const {
  const int64_t rows = ln2_full.dim(0);
  *fc1_out = ops_->NewActivation({rows, fc1_.local_out()});
  *act = ops_->NewActivation({rows, local_ffn_});
  if (shape_.swiglu) {
    fc1_.Forward(ln2_full, fc1_out);
    ops_->SwigluForward(*fc1_out, act);
  } else {
    fc1_.ForwardGelu(ln2_full, fc1_out, act);
  }
}

absl::StatusOr<Tensor> TransformerLayer::Forward(const Tensor& x, const MicroBatchContext& mb,
                                                 LayerStash* stash) const {
  const int64_t rows = mb.tokens();
  const int64_t local_rows = x.dim(0);
  const uint64_t hidden_index = HiddenDropoutIndex(mb, local_rows);
  stash->x = x;

  // Attention block.
  RETURN_IF_ERROR(NormsOut(ln1_, x, &stash->ln1_out, &stash->ln1_full, &stash->ln1));
  stash->qkv = ops_->NewActivation({rows, qkv_.local_out()});
  qkv_.Forward(stash->ln1_full, &stash->qkv);
  ApplyRopeToQueriesAndKeys(mb, /*inverse=*/false, &stash->qkv);
  AttentionCore(mb, stash->qkv, &stash->attention, &stash->ctx);

  Tensor proj_partial = ops_->NewActivation({rows, shape_.hidden});
  proj_.Forward(stash->ctx, &proj_partial);
  ASSIGN_OR_RETURN(stash->x1, tp_->ExitForward(std::move(proj_partial)));
  proj_.BiasDropoutAdd(DropoutRng(DropoutSite::kAttentionOut, mb.iteration),
                       mb.Dropout(shape_.hidden_dropout), hidden_index, x, &stash->x1);

  // MLP block.
  RETURN_IF_ERROR(NormsOut(ln2_, stash->x1, &stash->ln2_out, &stash->ln2_full, &stash->ln2));
  MlpIn(stash->ln2_full, &stash->fc1_out, &stash->act);
  Tensor fc2_partial = ops_->NewActivation({rows, shape_.hidden});
  fc2_.Forward(stash->act, &fc2_partial);
  ASSIGN_OR_RETURN(Tensor out, tp_->ExitForward(std::move(fc2_partial)));
  fc2_.BiasDropoutAdd(DropoutRng(DropoutSite::kMlpOut, mb.iteration),
                      mb.Dropout(shape_.hidden_dropout), hidden_index, stash->x1, &out);

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
  if (selective_.mlp) MlpIn(stash->ln2_full, &stash->fc1_out, &stash->act);
  if (selective_.core_attn) {
    Tensor ctx;  // already kept; recomputed alongside the probabilities and dropped
    AttentionCore(mb, stash->qkv, &stash->attention, &ctx);
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> TransformerLayer::BackwardInput(const Tensor& dy,
                                                       const MicroBatchContext& mb,
                                                       LayerStash* stash) const {
  const int64_t rows = mb.tokens();
  const int64_t local_rows = dy.dim(0);
  const int64_t local_heads = local_groups_ * shape_.heads_per_group();
  const uint64_t hidden_index = HiddenDropoutIndex(mb, local_rows);
  RETURN_IF_ERROR(RecomputeDropped(mb, stash));

  // MLP block.
  Tensor d_fc2 = ops_->NewActivation({local_rows, shape_.hidden});
  ops_->Dropout(DropoutRng(DropoutSite::kMlpOut, mb.iteration), mb.Dropout(shape_.hidden_dropout),
                hidden_index, dy, &d_fc2);
  ASSIGN_OR_RETURN(stash->d_fc2_full, tp_->ExitBackward(d_fc2));
  stash->d_fc1 = ops_->NewActivation({rows, fc1_.local_out()});
  if (shape_.swiglu) {
    Tensor d_act = ops_->NewActivation({rows, local_ffn_});
    fc2_.BackwardInput(stash->d_fc2_full, &d_act);
    ops_->SwigluBackward(stash->fc1_out, d_act, &stash->d_fc1);
  } else {
    fc2_.BackwardInputGelu(stash->d_fc2_full, stash->fc1_out, &stash->d_fc1);
  }
  Tensor d_ln2_partial = ops_->NewActivation({rows, shape_.hidden});
  fc1_.BackwardInput(stash->d_fc1, &d_ln2_partial);
  ASSIGN_OR_RETURN(stash->d_ln2, tp_->EnterBackward(std::move(d_ln2_partial)));
  Tensor d_x1 = ops_->NewActivation({local_rows, shape_.hidden});
  ln2_.BackwardInput(stash->d_ln2, stash->x1, stash->ln2, &d_x1);
  ops_->Add(dy, &d_x1);  // residual

  // Attention block.
  Tensor d_proj = ops_->NewActivation({local_rows, shape_.hidden});
  ops_->Dropout(DropoutRng(DropoutSite::kAttentionOut, mb.iteration),
                mb.Dropout(shape_.hidden_dropout), hidden_index, d_x1, &d_proj);
  ASSIGN_OR_RETURN(stash->d_proj_full, tp_->ExitBackward(d_proj));
  Tensor d_ctx = ops_->NewActivation({rows, local_heads * shape_.head_dim});
  proj_.BackwardInput(stash->d_proj_full, &d_ctx);
  const CounterRng probs_rng = DropoutRng(DropoutSite::kAttentionProbs, mb.iteration);
  stash->d_qkv = ops_->NewActivation({rows, qkv_.local_out()});
  ops_->AttentionBackward(AttentionShapeOf(mb), stash->qkv, stash->attention, stash->ctx, d_ctx,
                          AttentionScale(), AttentionDropoutOf(mb, &probs_rng), &stash->d_qkv);
  ApplyRopeToQueriesAndKeys(mb, /*inverse=*/true, &stash->d_qkv);
  Tensor d_ln1_partial = ops_->NewActivation({rows, shape_.hidden});
  qkv_.BackwardInput(stash->d_qkv, &d_ln1_partial);
  ASSIGN_OR_RETURN(stash->d_ln1, tp_->EnterBackward(std::move(d_ln1_partial)));
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
  qkv_.AppendParameters(&params);
  proj_.AppendParameters(&params);
  ln2_.AppendParameters(&params);
  fc1_.AppendParameters(&params);
  fc2_.AppendParameters(&params);
  return params;
}

void TransformerLayer::BackwardWeight(LayerStash* stash) {
  fc2_.BackwardWeight(stash->act, stash->d_fc2_full);
  fc1_.BackwardWeight(stash->ln2_full, stash->d_fc1);
  ln2_.BackwardWeight(stash->d_ln2, stash->x1, stash->ln2);
  proj_.BackwardWeight(stash->ctx, stash->d_proj_full);
  qkv_.BackwardWeight(stash->ln1_full, stash->d_qkv);
  ln1_.BackwardWeight(stash->d_ln1, stash->x, stash->ln1);
  *stash = LayerStash();
}

}  // namespace conveyor
