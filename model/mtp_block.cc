#include "model/mtp_block.h"

#include <algorithm>
#include <string>
#include <utility>

#include "base/status_macros.h"
#include "model/context_shard.h"

namespace conveyor {
namespace {

std::string DepthName(const ModelShape& s, int64_t depth) {
  return "layers." + std::to_string(s.num_layers + depth);
}

// Megatron's weight of a depth's token in the gradient (process_mtp_loss): the model's
// loss weighting, averaged over the depth's own unmasked tokens rather than the model's
// (its rolled mask has fewer): scale / n_k, or scale * n / n_k under per-token loss.
float DepthTokenWeight(const LossWeighting& w, int64_t main_tokens, int64_t depth_tokens) {
  const float n_k = static_cast<float>(std::max<int64_t>(depth_tokens, 1));
  return w.per_token ? w.scale * static_cast<float>(main_tokens) / n_k : w.scale / n_k;
}

}  // namespace

ModelShape MtpLayerShape(const ModelShape& s) {
  ModelShape layer = s;
  if (s.moe.experts() > 0) {
    layer.moe.layers.resize(s.num_layers + s.mtp_layers, s.moe.IsMoeLayer(s.num_layers - 1));
  }
  return layer;
}

MtpBlock::Depth::Depth(const Ops* ops, ParameterStore* store, const ModelShape& s, int64_t index,
                       const RopeTable* rope, uint64_t seed, const TensorParallel* tp,
                       SelectiveRecompute selective)
    : enorm(ops, store, DepthName(s, index) + ".enorm", s.hidden, s.rms_norm, s.norm_epsilon,
            tp->sequence_parallel()),
      hnorm(ops, store, DepthName(s, index) + ".hnorm", s.hidden, s.rms_norm, s.norm_epsilon,
            tp->sequence_parallel()),
      eh_proj(ops, store, DepthName(s, index) + ".eh_proj", 2 * s.hidden, s.hidden,
              /*bias=*/false, s.init_std, LinearParallelism::kColumn,
              Sharding::Block(0, s.hidden, tp->size(), tp->rank())),
      layer(ops, store, s, s.num_layers + index, rope, seed, tp, selective),
      final_norm(ops, store, DepthName(s, index) + ".final_norm", s.hidden, s.rms_norm,
                 s.norm_epsilon, tp->sequence_parallel()) {}

MtpBlock::MtpBlock(const Ops* ops, ParameterStore* store, const ModelShape& shape,
                   const RopeTable* rope, uint64_t seed, const TensorParallel* tp,
                   SelectiveRecompute selective, Parameter* word_embedding, OutputLoss* output)
    : ops_(ops),
      shape_(shape),
      seed_(seed),
      tp_(tp),
      word_embedding_(word_embedding),
      output_(output) {
  const ModelShape layer_shape = MtpLayerShape(shape);
  depths_.reserve(shape.mtp_layers);
  for (int64_t k = 0; k < shape.mtp_layers; ++k) {
    depths_.emplace_back(ops, store, layer_shape, k, rope, seed, tp, selective);
  }
}

CounterRng MtpBlock::EmbeddingDropoutRng(int64_t depth, int64_t iteration) const {
  const uint64_t stream =
      MixStream(StreamId("dropout.mtp_embedding"), static_cast<uint64_t>(depth));
  return CounterRng(seed_, MixStream(stream, static_cast<uint64_t>(iteration)));
}

absl::StatusOr<Tensor> MtpBlock::Embed(const MicroBatchContext& mb, int64_t depth,
                                       const std::vector<int32_t>& tokens) const {
  Tensor partial = ops_->NewActivation({mb.tokens(), shape_.hidden});
  ops_->EmbeddingForward(word_embedding_->compute_value(), output_->vocab_start(), tokens,
                         &partial);
  ASSIGN_OR_RETURN(Tensor e, tp_->ExitForward(std::move(partial)));
  DropoutRows(*ops_, EmbeddingDropoutRng(depth, mb.iteration), mb.Dropout(shape_.hidden_dropout),
              mb, tp_->FirstShardRow(e.dim(0)), e, &e);
  return e;
}

absl::Status MtpBlock::EmbedBackward(const MicroBatchContext& mb, int64_t depth, const Tensor& de,
                                     const std::vector<int32_t>& tokens) {
  Tensor d = de.Clone(MemoryCategory::kActivations);
  DropoutRows(*ops_, EmbeddingDropoutRng(depth, mb.iteration), mb.Dropout(shape_.hidden_dropout),
              mb, tp_->FirstShardRow(d.dim(0)), d, &d);
  ASSIGN_OR_RETURN(Tensor d_full, tp_->ExitBackward(d));
  ops_->EmbeddingBackwardWeight(d_full, output_->vocab_start(), tokens, &word_embedding_->grad);
  return absl::OkStatus();
}

absl::StatusOr<Tensor> MtpBlock::Combine(int64_t depth, MtpDepthStash* s) const {
  const Depth& d = depths_[depth];
  const int64_t rows = s->e.dim(0), h = shape_.hidden;
  Tensor en = ops_->NewActivation({rows, h}), hn = ops_->NewActivation({rows, h});
  s->enorm = d.enorm.Forward(s->e, &en);
  s->hnorm = d.hnorm.Forward(s->h_in, &hn);
  // Megatron's order: the embedding's half first.
  Tensor cat = ops_->NewActivation({rows, 2 * h});
  ops_->CopyColumns(en, 0, h, &cat, 0);
  ops_->CopyColumns(hn, 0, h, &cat, h);
  ASSIGN_OR_RETURN(s->cat_full, tp_->EnterForward(cat));
  const int64_t all_rows = s->cat_full.dim(0), local = d.eh_proj.local_out();
  Tensor y = ops_->NewActivation({all_rows, local});
  d.eh_proj.Forward(s->cat_full, &y);
  // M_k's output columns gathered over TP (and under SP scattered to this rank's rows,
  // as Megatron does next) as the region's exit of each rank's columns placed among
  // zeros: a sum of one value and zeros, so exact.
  Tensor placed = Tensor::Zeros({all_rows, h}, MemoryCategory::kActivations, ops_->compute_dtype(),
                                ops_->device());
  ops_->CopyColumns(y, 0, local, &placed, tp_->rank() * local);
  return tp_->ExitForward(std::move(placed));
}

absl::Status MtpBlock::CombineBackward(const Tensor& du, int64_t depth, MtpDepthStash* s,
                                       Tensor* de, Tensor* dh) {
  Depth& d = depths_[depth];
  const int64_t h = shape_.hidden, local = d.eh_proj.local_out();
  ASSIGN_OR_RETURN(const Tensor d_placed, tp_->ExitBackward(du));
  const int64_t all_rows = d_placed.dim(0);
  Tensor dy = ops_->NewActivation({all_rows, local});
  ops_->CopyColumns(d_placed, tp_->rank() * local, local, &dy, 0);
  Tensor d_cat_partial = ops_->NewActivation({all_rows, 2 * h});
  d.eh_proj.BackwardInput(dy, &d_cat_partial);
  d.eh_proj.BackwardWeight(s->cat_full, dy);
  ASSIGN_OR_RETURN(const Tensor d_cat, tp_->EnterBackward(std::move(d_cat_partial)));
  const int64_t rows = d_cat.dim(0);
  Tensor d_en = ops_->NewActivation({rows, h}), d_hn = ops_->NewActivation({rows, h});
  ops_->CopyColumns(d_cat, 0, h, &d_en, 0);
  ops_->CopyColumns(d_cat, h, h, &d_hn, 0);
  *de = ops_->NewActivation({rows, h});
  *dh = ops_->NewActivation({rows, h});
  d.enorm.BackwardInput(d_en, s->e, s->enorm, de);
  d.enorm.BackwardWeight(d_en, s->e, s->enorm);
  d.hnorm.BackwardInput(d_hn, s->h_in, s->hnorm, dh);
  d.hnorm.BackwardWeight(d_hn, s->h_in, s->hnorm);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<MaskedLoss>> MtpBlock::Forward(const MicroBatchContext& mb,
                                                          const Tensor& h0, const int32_t* tokens,
                                                          const int32_t* labels,
                                                          std::vector<MtpDepthStash>* stash) const {
  const int64_t n = mb.batch * mb.seq;
  std::vector<float> mask(n, 1.0f);
  if (mb.documents != nullptr && !mb.documents->loss_mask.empty()) {
    mask = mb.documents->loss_mask;
  }
  stash->resize(depths_.size());
  std::vector<MaskedLoss> losses;
  Tensor h = h0;
  for (int64_t d = 0; d < depths(); ++d) {
    const int64_t k = d + 1;
    MtpDepthStash& s = (*stash)[d];
    const std::vector<float> rolled_mask = RollSamples(mask.data(), mb.batch, mb.seq, k, 0.0f);
    s.loss_tokens =
        std::count_if(rolled_mask.begin(), rolled_mask.end(), [](float m) { return m != 0.0f; });
    s.tokens = LocalRows(mb, absl::MakeConstSpan(RollSamples(tokens, mb.batch, mb.seq, k, 0)));
    ASSIGN_OR_RETURN(s.e, Embed(mb, d, s.tokens));
    s.h_in = h;
    ASSIGN_OR_RETURN(const Tensor u, Combine(d, &s));
    ASSIGN_OR_RETURN(s.layer_out, depths_[d].layer.Forward(u, mb, &s.layer));
    Tensor out = ops_->NewActivation(s.layer_out.shape());
    s.final_norm = depths_[d].final_norm.Forward(s.layer_out, &out);
    ASSIGN_OR_RETURN(
        const MaskedLoss loss,
        output_->Forward(
            out, LocalRows(mb, absl::MakeConstSpan(RollSamples(labels, mb.batch, mb.seq, k, 0))),
            LocalRows(mb, absl::MakeConstSpan(rolled_mask)), &s.output));
    losses.push_back(loss);
    h = out;
  }
  return losses;
}

absl::StatusOr<Tensor> MtpBlock::Backward(const MicroBatchContext& mb,
                                          const LossWeighting& weighting, int64_t main_tokens,
                                          std::vector<MtpDepthStash>* stash) {
  const float lambda_over_d = shape_.mtp_loss_scaling / static_cast<float>(depths());
  Tensor dh;  // d(loss)/d(h^k) through depth k + 1
  for (int64_t d = depths(); d-- > 0;) {
    MtpDepthStash& s = (*stash)[d];
    const float weight = lambda_over_d * DepthTokenWeight(weighting, main_tokens, s.loss_tokens);
    ASSIGN_OR_RETURN(Tensor d_out, output_->Backward(weight, &s.output));
    if (!dh.empty()) ops_->Add(dh, &d_out);
    Tensor dx = ops_->NewActivation(s.layer_out.shape());
    depths_[d].final_norm.BackwardInput(d_out, s.layer_out, s.final_norm, &dx);
    depths_[d].final_norm.BackwardWeight(d_out, s.layer_out, s.final_norm);
    ASSIGN_OR_RETURN(const Tensor du, depths_[d].layer.BackwardInput(dx, mb, &s.layer));
    depths_[d].layer.BackwardWeight(&s.layer);
    Tensor de;
    RETURN_IF_ERROR(CombineBackward(du, d, &s, &de, &dh));
    RETURN_IF_ERROR(EmbedBackward(mb, d, de, s.tokens));
  }
  stash->clear();
  return dh;
}

}  // namespace conveyor
