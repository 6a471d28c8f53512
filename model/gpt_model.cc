#include "model/gpt_model.h"

#include <cmath>

#include "base/status_macros.h"
#include "model/context_shard.h"
#include "runtime/cpu/cpu_ops.h"

namespace conveyor {

GptModel::GptModel(const ModelShape& shape, uint64_t seed, const TensorParallel* tp,
                   ModelPartition partition, SelectiveRecompute selective, const Ops* ops)
    : ops_(ops != nullptr ? ops : &CpuOps::Get()),
      shape_(shape),
      seed_(seed),
      tp_(tp != nullptr ? tp : &single_rank_),
      local_vocab_(shape.padded_vocab / tp_->size()),
      store_(seed),
      rope_(shape.rope
                ? std::make_unique<RopeTable>(shape.seq, shape.rotary_dims(), shape.rotary_base,
                                              shape.rope_scaling)
                : nullptr) {
  const Sharding vocab_rows = Sharding::Block(0, shape.padded_vocab, tp_->size(), tp_->rank());
  // The last stage of a tied model holds its own copy of the word embedding; the same
  // name gives it the same initial values, and the embedding group keeps the copies
  // equal by summing their gradients.
  if (partition.has_embedding || (partition.has_head && shape.tied_embeddings)) {
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
  }
}

const Parameter* GptModel::output_weight() const {
  return output_layer_ != nullptr ? output_layer_ : word_embedding_;
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

absl::StatusOr<MaskedLoss> GptModel::HeadForward(const MicroBatchContext& mb, const Tensor& x,
                                                 const int32_t* labels, HeadStash* stash) const {
  const int64_t rows = mb.tokens();
  stash->labels = LocalRows(mb, absl::MakeConstSpan(labels, mb.batch * mb.seq));
  if (mb.documents != nullptr) {
    stash->loss_mask = LocalRows(mb, absl::MakeConstSpan(mb.documents->loss_mask));
  }
  stash->final_in = x;
  Tensor final_out = ops_->NewActivation(x.shape());
  stash->final_norm = final_norm_->Forward(x, &final_out);
  ASSIGN_OR_RETURN(stash->final_out_full, tp_->EnterForward(final_out));
  stash->logits = ops_->NewActivation({rows, local_vocab_});
  ops_->Gemm(false, true, rows, local_vocab_, shape_.hidden, 1.0f, stash->final_out_full,
             output_weight()->compute_value(), 0.0f, &stash->logits);

  std::vector<double> row_max(rows), sum_exp(rows), target(rows);
  ops_->RowMaxSumExpAndTarget(stash->logits, stash->labels, vocab_start(),
                              absl::MakeSpan(row_max), absl::MakeSpan(sum_exp),
                              absl::MakeSpan(target));
  if (tp_->size() > 1) {
    // Each rank's sum is relative to its own max: rescale to the global one,
    // S = sum_r S_r exp(m_r - m), before summing.
    std::vector<double> global_max = row_max;
    RETURN_IF_ERROR(tp_->comm()->AllReduceMax(global_max.data(), rows));
    for (int64_t r = 0; r < rows; ++r) sum_exp[r] *= std::exp(row_max[r] - global_max[r]);
    row_max = std::move(global_max);
    RETURN_IF_ERROR(tp_->comm()->AllReduceSum(sum_exp.data(), rows));
    RETURN_IF_ERROR(tp_->comm()->AllReduceSum(target.data(), rows));
  }
  stash->logsumexp = Tensor::Zeros({rows}, MemoryCategory::kActivations);
  MaskedLoss loss;
  for (int64_t r = 0; r < rows; ++r) {
    const double lse = row_max[r] + std::log(sum_exp[r]);
    stash->logsumexp.data()[r] = static_cast<float>(lse);
    if (!stash->loss_mask.empty() && stash->loss_mask[r] == 0.0f) continue;
    loss.sum += lse - target[r];
    ++loss.tokens;
  }
  // The gradient's weights count the micro-batch's unmasked tokens on every
  // context-parallel rank, not just this rank's.
  stash->loss_tokens = UnmaskedTokens(mb);
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
  const int64_t rows = mb.tokens();
  // Masked tokens get no gradient; the others weigh TokenWeight (loss_scale / unmasked
  // tokens for a mean).
  ops_->CrossEntropyBackward(stash->labels, absl::MakeConstSpan(stash->logsumexp.data(), rows),
                             vocab_start(), weighting.TokenWeight(stash->loss_tokens),
                             stash->loss_mask, &stash->logits);
  const Tensor& d_logits = stash->logits;
  Parameter* weight = output_layer_ != nullptr ? output_layer_ : word_embedding_;
  Tensor d_out_partial = ops_->NewActivation({rows, shape_.hidden});
  ops_->Gemm(false, false, rows, shape_.hidden, local_vocab_, 1.0f, d_logits, weight->compute_value(),
             0.0f, &d_out_partial);
  ops_->Gemm(true, false, local_vocab_, shape_.hidden, rows, 1.0f, d_logits, stash->final_out_full,
             1.0f, &weight->grad);
  ASSIGN_OR_RETURN(Tensor d_final_out, tp_->EnterBackward(std::move(d_out_partial)));
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
  ASSIGN_OR_RETURN(const MaskedLoss loss, HeadForward(mb, x, labels, &stash->head));
  return static_cast<float>(loss.Mean());
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
