#include "model/gpt_model.h"

#include <cmath>

#include "runtime/cpu/cross_entropy.h"
#include "runtime/cpu/dropout.h"
#include "runtime/cpu/embedding.h"
#include "runtime/cpu/gemm.h"

namespace conveyor {

GptModel::GptModel(const ModelShape& shape, uint64_t seed)
    : shape_(shape),
      seed_(seed),
      store_(seed),
      rope_(shape.rope ? std::make_unique<cpu::RopeTable>(shape.seq, shape.head_dim,
                                                           shape.rotary_base)
                       : nullptr),
      word_embedding_(store_.Add("embedding.word_embeddings.weight",
                                 {shape.padded_vocab, shape.hidden},
                                 {InitKind::kNormal, shape.init_std}, true)),
      position_embedding_(shape.rope ? nullptr
                                     : store_.Add("embedding.position_embeddings.weight",
                                                  {shape.max_positions, shape.hidden},
                                                  {InitKind::kNormal, shape.init_std}, true)),
      final_norm_(&store_, "final_norm", shape.hidden, shape.rms_norm, shape.norm_epsilon) {
  layers_.reserve(shape.num_layers);
  for (int64_t i = 0; i < shape.num_layers; ++i) {
    layers_.emplace_back(&store_, shape, i, rope_.get(), seed);
  }
  if (!shape.tied_embeddings) {
    // Megatron's output layer has no bias.
    output_layer_ = std::make_unique<Linear>(&store_, "output_layer", shape.hidden,
                                             shape.padded_vocab, false, shape.init_std);
  }
}

CounterRng GptModel::EmbeddingDropoutRng(int64_t iteration) const {
  return CounterRng(seed_, MixStream(StreamId("dropout.embedding"),
                                     static_cast<uint64_t>(iteration)));
}

Tensor GptModel::Embed(const MicroBatchContext& mb, const int32_t* tokens) const {
  Tensor x = Tensor::Zeros({mb.tokens(), shape_.hidden}, MemoryCategory::kActivations);
  cpu::EmbeddingForward(word_embedding_->value.data(), tokens, mb.tokens(), shape_.hidden,
                        false, x.data());
  if (position_embedding_ != nullptr) {
    for (int64_t b = 0; b < mb.batch; ++b) {
      // Positions 0..seq-1 are rows 0..seq-1 of the table: a contiguous block.
      float* row = x.data() + b * mb.seq * shape_.hidden;
      const float* pos = position_embedding_->value.data();
      for (int64_t i = 0; i < mb.seq * shape_.hidden; ++i) row[i] += pos[i];
    }
  }
  cpu::ApplyDropout(EmbeddingDropoutRng(mb.iteration), shape_.hidden_dropout,
                    static_cast<uint64_t>(mb.first_sample * mb.seq * shape_.hidden),
                    x.numel(), x.data(), x.data());
  return x;
}

void GptModel::EmbeddingBackwardWeight(const MicroBatchContext& mb, const int32_t* tokens,
                                       Tensor* d_embedding) {
  cpu::ApplyDropout(EmbeddingDropoutRng(mb.iteration), shape_.hidden_dropout,
                    static_cast<uint64_t>(mb.first_sample * mb.seq * shape_.hidden),
                    d_embedding->numel(), d_embedding->data(), d_embedding->data());
  cpu::EmbeddingBackwardWeight(d_embedding->data(), tokens, mb.tokens(), shape_.hidden,
                               word_embedding_->grad.data());
  if (position_embedding_ != nullptr) {
    float* dpos = position_embedding_->grad.data();
    for (int64_t b = 0; b < mb.batch; ++b) {
      const float* d = d_embedding->data() + b * mb.seq * shape_.hidden;
      for (int64_t i = 0; i < mb.seq * shape_.hidden; ++i) dpos[i] += d[i];
    }
  }
}

float GptModel::Forward(const MicroBatchContext& mb, const int32_t* tokens,
                        const int32_t* labels, GptStash* stash) {
  const int64_t rows = mb.tokens();
  stash->tokens.assign(tokens, tokens + rows);
  stash->labels.assign(labels, labels + rows);
  Tensor x = Embed(mb, tokens);
  stash->layers.resize(layers_.size());
  for (size_t i = 0; i < layers_.size(); ++i) x = layers_[i].Forward(x, mb, &stash->layers[i]);

  stash->final_in = x;
  stash->final_out = Tensor::Zeros({rows, shape_.hidden}, MemoryCategory::kActivations);
  stash->final_norm = final_norm_.Forward(x, &stash->final_out);
  stash->logits = Tensor::Zeros({rows, shape_.padded_vocab}, MemoryCategory::kActivations);
  if (output_layer_ != nullptr) {
    output_layer_->Forward(stash->final_out.data(), rows, stash->logits.data());
  } else {
    cpu::Gemm(false, true, rows, shape_.padded_vocab, shape_.hidden, 1.0f,
              stash->final_out.data(), word_embedding_->value.data(), 0.0f,
              stash->logits.data());
  }
  stash->logsumexp = Tensor::Zeros({rows}, MemoryCategory::kActivations);
  std::vector<float> losses(rows);
  cpu::CrossEntropyForward(stash->logits.data(), labels, rows, shape_.padded_vocab,
                           losses.data(), stash->logsumexp.data());
  double sum = 0.0;
  for (float l : losses) sum += l;
  return static_cast<float>(sum / static_cast<double>(rows));
}

void GptModel::Backward(const MicroBatchContext& mb, float loss_scale, GptStash* stash) {
  const int64_t rows = mb.tokens();
  // d(loss_scale * mean loss)/d(loss_t) = loss_scale / rows.
  cpu::CrossEntropyBackward(stash->labels.data(), stash->logsumexp.data(), rows,
                            shape_.padded_vocab, loss_scale / static_cast<float>(rows),
                            stash->logits.data());
  const Tensor& d_logits = stash->logits;
  Tensor d_final_out = Tensor::Zeros({rows, shape_.hidden}, MemoryCategory::kActivations);
  if (output_layer_ != nullptr) {
    output_layer_->BackwardInput(d_logits.data(), rows, d_final_out.data());
    output_layer_->BackwardWeight(stash->final_out.data(), d_logits.data(), rows);
  } else {
    const float* table = word_embedding_->value.data();
    cpu::Gemm(false, false, rows, shape_.hidden, shape_.padded_vocab, 1.0f, d_logits.data(),
              table, 0.0f, d_final_out.data());
    cpu::Gemm(true, false, shape_.padded_vocab, shape_.hidden, rows, 1.0f, d_logits.data(),
              stash->final_out.data(), 1.0f, word_embedding_->grad.data());
  }
  Tensor dx = Tensor::Zeros({rows, shape_.hidden}, MemoryCategory::kActivations);
  final_norm_.BackwardInput(d_final_out, stash->final_in, stash->final_norm, &dx);
  final_norm_.BackwardWeight(d_final_out, stash->final_in, stash->final_norm);
  stash->logits = Tensor();

  for (size_t i = layers_.size(); i-- > 0;) {
    dx = layers_[i].BackwardInput(dx, mb, &stash->layers[i]);
    layers_[i].BackwardWeight(&stash->layers[i]);
  }
  EmbeddingBackwardWeight(mb, stash->tokens.data(), &dx);
  *stash = GptStash();
}

}  // namespace conveyor
