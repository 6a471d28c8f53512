#include "model/gpt_model.h"

#include <algorithm>
#include <cmath>

#include "base/status_macros.h"
#include "model/context_shard.h"

namespace conveyor {

GptModel::GptModel(const Ops* ops, const ModelShape& shape, uint64_t seed, const TensorParallel* tp,
                   ModelPartition partition, SelectiveRecompute selective)
    : ops_(ops),
      shape_(shape),
      seed_(seed),
      tp_(tp),
      local_vocab_(shape.padded_vocab / tp_->size()),
      store_(seed),
      rope_(shape.rope ? std::make_unique<RopeTable>(shape.seq, shape.rotary_dims(),
                                                     shape.rotary_base, shape.rope_scaling)
                       : nullptr) {
  const Sharding vocab_rows = Sharding::Block(0, shape.padded_vocab, tp_->size(), tp_->rank());
  // The last stage of a tied model holds its own copy of the word embedding, as does
  // the last stage under multi-token prediction, whose depths embed tokens too
  // (Megatron's mtp_process stage); the same name gives it the same initial values, and
  // the embedding group keeps the copies equal by summing their gradients.
  if (partition.has_embedding ||
      (partition.has_head && (shape.tied_embeddings || shape.mtp_layers > 0))) {
    word_embedding_ =
        store_.Add(kWordEmbeddingName, {shape.padded_vocab, shape.hidden},
                   {InitKind::kNormal, shape.init_std}, true, vocab_rows);
  }
  // The lookup and the tied head's GEMM both read the table in the compute type.
  if (word_embedding_ != nullptr) {
    word_embedding_->read_in_compute_type = true;
    word_embedding_->embedding_or_output = true;
  }
  if (partition.has_embedding && shape.learned_positions()) {
    position_embedding_ =
        store_.Add("embedding.position_embeddings.weight", {shape.max_positions, shape.hidden},
                   {InitKind::kNormal, shape.init_std}, true);
    // Under SP each rank adds the positions of its own rows only.
    position_embedding_->sequence_parallel = tp_->sequence_parallel();
  }
  const int64_t count =
      partition.num_layers < 0 ? shape.num_layers - partition.first_layer : partition.num_layers;
  layers_.reserve(count);
  for (int64_t i = 0; i < count; ++i) {
    layers_.emplace_back(ops_, &store_, shape, partition.first_layer + i, rope_.get(), seed, tp_,
                         selective);
  }
  if (partition.has_head) {
    final_norm_ =
        std::make_unique<NormLayer>(ops_, &store_, "final_norm", shape.hidden, shape.rms_norm,
                                    shape.norm_epsilon, tp_->sequence_parallel());
    if (!shape.tied_embeddings) {
      // Megatron's output layer: column-parallel over the vocabulary, no bias.
      output_layer_ = store_.Add("output_layer.weight", {shape.padded_vocab, shape.hidden},
                                 {InitKind::kNormal, shape.init_std}, true, vocab_rows);
    }
    if (output_layer_ != nullptr) {
      output_layer_->read_in_compute_type = true;
      output_layer_->embedding_or_output = true;
    }
    output_loss_ = std::make_unique<OutputLoss>(
        ops_, tp_, output_layer_ != nullptr ? output_layer_ : word_embedding_, shape.hidden,
        local_vocab_);
    if (shape.mtp_layers > 0) {
      mtp_ = std::make_unique<MtpBlock>(ops_, &store_, shape, rope_.get(), seed, tp_, selective,
                                        word_embedding_, output_loss_.get());
    }
  }
}

std::vector<TransformerLayer*> GptModel::AllLayers() {
  std::vector<TransformerLayer*> all;
  for (TransformerLayer& layer : layers_) all.push_back(&layer);
  if (mtp_ != nullptr) {
    for (int64_t k = 0; k < mtp_->depths(); ++k) all.push_back(&mtp_->layer(k));
  }
  return all;
}

CounterRng GptModel::EmbeddingDropoutRng(int64_t iteration) const {
  return CounterRng(seed_,
                    MixStream(StreamId("dropout.embedding"), static_cast<uint64_t>(iteration)));
}

void GptModel::EmbeddingDropout(const MicroBatchContext& mb, Tensor* x) const {
  DropoutRows(*ops_, EmbeddingDropoutRng(mb.iteration), mb.Dropout(shape_.hidden_dropout), mb,
              tp_->FirstShardRow(x->dim(0)), *x, x);
}

absl::StatusOr<Tensor> GptModel::EmbeddingForward(const MicroBatchContext& mb,
                                                  const int32_t* tokens,
                                                  EmbeddingStash* stash) const {
  stash->tokens = LocalRows(mb, absl::MakeConstSpan(tokens, mb.batch * mb.seq));
  Tensor partial = ops_->NewActivation({mb.tokens(), shape_.hidden});
  ops_->EmbeddingForward(word_embedding_->compute_value(), vocab_start(), stash->tokens, &partial);
  ASSIGN_OR_RETURN(Tensor x, tp_->ExitForward(std::move(partial)));
  const int64_t local_rows = x.dim(0);
  if (position_embedding_ != nullptr) {
    ops_->AddPositionRows(position_embedding_->value,
                          RowPositions(mb, tp_->FirstShardRow(local_rows), local_rows), &x);
  }
  EmbeddingDropout(mb, &x);
  return x;
}

absl::Status GptModel::EmbeddingBackward(const MicroBatchContext& mb, const Tensor& d_embedding,
                                         EmbeddingStash* stash) {
  const int64_t local_rows = d_embedding.dim(0);
  Tensor d = d_embedding.Clone(MemoryCategory::kActivations);
  EmbeddingDropout(mb, &d);
  if (position_embedding_ != nullptr) {
    ops_->AccumulatePositionGrad(d, RowPositions(mb, tp_->FirstShardRow(local_rows), local_rows),
                                 &position_embedding_->grad);
  }
  ASSIGN_OR_RETURN(Tensor d_full, tp_->ExitBackward(d));
  ops_->EmbeddingBackwardWeight(d_full, vocab_start(), stash->tokens, &word_embedding_->grad);
  *stash = EmbeddingStash();
  return absl::OkStatus();
}

absl::StatusOr<HeadLoss> GptModel::HeadForward(const MicroBatchContext& mb, const Tensor& x,
                                               const int32_t* tokens, const int32_t* labels,
                                               HeadStash* stash) const {
  if (mb.documents != nullptr) {
    stash->loss_mask = LocalRows(mb, absl::MakeConstSpan(mb.documents->loss_mask));
  }
  stash->final_in = x;
  Tensor final_out = ops_->NewActivation(x.shape());
  stash->final_norm = final_norm_->Forward(x, &final_out);
  HeadLoss loss;
  std::vector<int32_t> local_labels =
      LocalRows(mb, absl::MakeConstSpan(labels, mb.batch * mb.seq));
  ASSIGN_OR_RETURN(loss.lm, output_loss_->Forward(final_out, std::move(local_labels),
                                                  stash->loss_mask, &stash->output));
  // The gradient's weights count the micro-batch's unmasked tokens on every
  // context-parallel rank, not just this rank's.
  stash->loss_tokens = UnmaskedTokens(mb);
  if (mtp_ != nullptr) {
    ASSIGN_OR_RETURN(const std::vector<MaskedLoss> depths,
                     mtp_->Forward(mb, final_out, tokens, labels, &stash->mtp));
    for (size_t k = 0; k < depths.size(); ++k) {
      loss.mtp.push_back(depths[k].sum /
                         static_cast<double>(std::max<int64_t>(stash->mtp[k].loss_tokens, 1)));
    }
  }
  return loss;
}

int64_t GptModel::UnmaskedTokens(const MicroBatchContext& mb) {
  if (mb.documents == nullptr || mb.documents->loss_mask.empty()) return mb.batch * mb.seq;
  int64_t tokens = 0;
  for (const float m : mb.documents->loss_mask) tokens += m != 0.0f ? 1 : 0;
  return tokens;
}

absl::StatusOr<Tensor> GptModel::HeadBackward(const MicroBatchContext& mb,
                                              const LossWeighting& weighting, HeadStash* stash) {
  // Masked tokens get no gradient; the others weigh TokenWeight (loss_scale / unmasked
  // tokens for a mean).
  ASSIGN_OR_RETURN(Tensor d_final_out,
                   output_loss_->Backward(weighting.TokenWeight(stash->loss_tokens),
                                          &stash->output));
  if (mtp_ != nullptr) {
    // The depths read the final norm's output as h^0.
    ASSIGN_OR_RETURN(const Tensor d_h0,
                     mtp_->Backward(mb, weighting, stash->loss_tokens, &stash->mtp));
    ops_->Add(d_h0, &d_final_out);
  }
  Tensor dx = ops_->NewActivation(stash->final_in.shape());
  final_norm_->BackwardInput(d_final_out, stash->final_in, stash->final_norm, &dx);
  final_norm_->BackwardWeight(d_final_out, stash->final_in, stash->final_norm);
  *stash = HeadStash();
  return dx;
}

absl::StatusOr<float> GptModel::Forward(const MicroBatchContext& mb, const int32_t* tokens,
                                        const int32_t* labels, GptStash* stash) {
  ASSIGN_OR_RETURN(Tensor x, EmbeddingForward(mb, tokens, &stash->embedding));
  stash->layers.resize(layers_.size());
  for (size_t i = 0; i < layers_.size(); ++i) {
    ASSIGN_OR_RETURN(x, layers_[i].Forward(x, mb, &stash->layers[i]));
  }
  ASSIGN_OR_RETURN(const HeadLoss loss, HeadForward(mb, x, tokens, labels, &stash->head));
  double objective = loss.lm.Mean();
  for (const double depth : loss.mtp) {
    objective += shape_.mtp_loss_scaling / static_cast<double>(loss.mtp.size()) * depth;
  }
  return static_cast<float>(objective);
}

absl::Status GptModel::Backward(const MicroBatchContext& mb, float loss_scale, GptStash* stash) {
  ASSIGN_OR_RETURN(Tensor dx, HeadBackward(mb, LossWeighting{loss_scale}, &stash->head));
  SetAuxLossScale(loss_scale);
  for (size_t i = layers_.size(); i-- > 0;) {
    ASSIGN_OR_RETURN(dx, layers_[i].BackwardInput(dx, mb, &stash->layers[i]));
    layers_[i].BackwardWeight(&stash->layers[i]);
  }
  RETURN_IF_ERROR(EmbeddingBackward(mb, dx, &stash->embedding));
  *stash = GptStash();
  return absl::OkStatus();
}

}  // namespace conveyor
