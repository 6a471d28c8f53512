#include "model/transformer_layer.h"

#include <cmath>
#include <string>

#include "runtime/cpu/activation.h"
#include "runtime/cpu/attention.h"
#include "runtime/cpu/dropout.h"

namespace conveyor {
namespace {

Tensor Activation(int64_t rows, int64_t width) {
  return Tensor::Zeros({rows, width}, MemoryCategory::kActivations);
}

void AddInto(const Tensor& a, Tensor* b) {
  const float* pa = a.data();
  float* pb = b->data();
  for (int64_t i = 0; i < a.numel(); ++i) pb[i] += pa[i];
}

std::string LayerName(int64_t index) { return "layers." + std::to_string(index); }

}  // namespace

TransformerLayer::TransformerLayer(ParameterStore* store, const ModelShape& shape,
                                   int64_t layer_index, const cpu::RopeTable* rope,
                                   uint64_t seed)
    : shape_(shape),
      layer_index_(layer_index),
      rope_(rope),
      seed_(seed),
      ln1_(store, LayerName(layer_index) + ".input_norm", shape.hidden, shape.rms_norm,
           shape.norm_epsilon),
      qkv_(store, LayerName(layer_index) + ".attention.qkv", shape.hidden, shape.qkv_width(),
           shape.linear_bias, shape.init_std),
      // Output projections use Megatron's scaled init, std / sqrt(2 * num_layers), so
      // the residual stream's variance does not grow with depth.
      proj_(store, LayerName(layer_index) + ".attention.proj", shape.heads * shape.head_dim,
            shape.hidden, shape.linear_bias,
            shape.init_std / std::sqrt(2.0f * static_cast<float>(shape.num_layers))),
      ln2_(store, LayerName(layer_index) + ".post_attention_norm", shape.hidden,
           shape.rms_norm, shape.norm_epsilon),
      fc1_(store, LayerName(layer_index) + ".mlp.fc1", shape.hidden, shape.fc1_width(),
           shape.linear_bias, shape.init_std),
      fc2_(store, LayerName(layer_index) + ".mlp.fc2", shape.ffn_hidden, shape.hidden,
           shape.linear_bias,
           shape.init_std / std::sqrt(2.0f * static_cast<float>(shape.num_layers))) {}

CounterRng TransformerLayer::DropoutRng(DropoutSite site, int64_t iteration) const {
  uint64_t stream = MixStream(StreamId("dropout"), static_cast<uint64_t>(layer_index_));
  stream = MixStream(stream, static_cast<uint64_t>(site));
  return CounterRng(seed_, MixStream(stream, static_cast<uint64_t>(iteration)));
}

void TransformerLayer::ApplyRopeToQueriesAndKeys(Tensor* qkv, int64_t seq,
                                                 bool inverse) const {
  if (rope_ == nullptr) return;
  const int64_t width = shape_.qkv_width();
  const int64_t group_width = (shape_.heads_per_group() + 2) * shape_.head_dim;
  const int64_t rows = qkv->dim(0);
  for (int64_t t = 0; t < rows; ++t) {
    for (int64_t g = 0; g < shape_.query_groups; ++g) {
      // The group's query heads and its key head are adjacent: rotate them together.
      cpu::ApplyRope(*rope_, t % seq, shape_.heads_per_group() + 1, shape_.head_dim, inverse,
                     qkv->data() + t * width + g * group_width);
    }
  }
}

Tensor TransformerLayer::Forward(const Tensor& x, const MicroBatchContext& mb,
                                 LayerStash* stash) const {
  const int64_t rows = mb.tokens();
  const uint64_t hidden_index = static_cast<uint64_t>(mb.first_sample * mb.seq * shape_.hidden);
  stash->x = x;

  stash->ln1_out = Activation(rows, shape_.hidden);
  stash->ln1 = ln1_.Forward(x, &stash->ln1_out);
  stash->qkv = Activation(rows, shape_.qkv_width());
  qkv_.Forward(stash->ln1_out.data(), rows, stash->qkv.data());
  ApplyRopeToQueriesAndKeys(&stash->qkv, mb.seq, /*inverse=*/false);

  const cpu::AttentionShape attention{mb.batch, mb.seq, shape_.query_groups,
                                      shape_.heads_per_group(), shape_.head_dim};
  const CounterRng probs_rng = DropoutRng(DropoutSite::kAttentionProbs, mb.iteration);
  const cpu::AttentionDropout attention_dropout{&probs_rng, shape_.attention_dropout,
                                                mb.first_sample, 0, shape_.heads};
  stash->probs =
      Tensor::Zeros({mb.batch, shape_.heads, mb.seq, mb.seq}, MemoryCategory::kActivations);
  stash->ctx = Activation(rows, shape_.heads * shape_.head_dim);
  cpu::AttentionForward(attention, stash->qkv.data(), 1.0f / std::sqrt(float(shape_.head_dim)),
                        attention_dropout, stash->probs.data(), stash->ctx.data());

  stash->x1 = Activation(rows, shape_.hidden);
  proj_.Forward(stash->ctx.data(), rows, stash->x1.data());
  cpu::ApplyDropout(DropoutRng(DropoutSite::kAttentionOut, mb.iteration),
                    shape_.hidden_dropout, hidden_index, stash->x1.numel(), stash->x1.data(),
                    stash->x1.data());
  AddInto(x, &stash->x1);

  stash->ln2_out = Activation(rows, shape_.hidden);
  stash->ln2 = ln2_.Forward(stash->x1, &stash->ln2_out);
  stash->fc1_out = Activation(rows, shape_.fc1_width());
  fc1_.Forward(stash->ln2_out.data(), rows, stash->fc1_out.data());
  stash->act = Activation(rows, shape_.ffn_hidden);
  if (shape_.swiglu) {
    cpu::SwigluForward(stash->fc1_out.data(), rows, shape_.ffn_hidden, stash->act.data());
  } else {
    cpu::GeluForward(stash->fc1_out.data(), stash->fc1_out.numel(), stash->act.data());
  }

  Tensor out = Activation(rows, shape_.hidden);
  fc2_.Forward(stash->act.data(), rows, out.data());
  cpu::ApplyDropout(DropoutRng(DropoutSite::kMlpOut, mb.iteration), shape_.hidden_dropout,
                    hidden_index, out.numel(), out.data(), out.data());
  AddInto(stash->x1, &out);
  return out;
}

Tensor TransformerLayer::BackwardInput(const Tensor& dy, const MicroBatchContext& mb,
                                       LayerStash* stash) const {
  const int64_t rows = mb.tokens();
  const uint64_t hidden_index = static_cast<uint64_t>(mb.first_sample * mb.seq * shape_.hidden);

  // MLP branch.
  stash->d_fc2 = Activation(rows, shape_.hidden);
  cpu::ApplyDropout(DropoutRng(DropoutSite::kMlpOut, mb.iteration), shape_.hidden_dropout,
                    hidden_index, dy.numel(), dy.data(), stash->d_fc2.data());
  Tensor d_act = Activation(rows, shape_.ffn_hidden);
  fc2_.BackwardInput(stash->d_fc2.data(), rows, d_act.data());
  stash->d_fc1 = Activation(rows, shape_.fc1_width());
  if (shape_.swiglu) {
    cpu::SwigluBackward(stash->fc1_out.data(), d_act.data(), rows, shape_.ffn_hidden,
                        stash->d_fc1.data());
  } else {
    cpu::GeluBackward(stash->fc1_out.data(), d_act.data(), d_act.numel(),
                      stash->d_fc1.data());
  }
  stash->d_ln2 = Activation(rows, shape_.hidden);
  fc1_.BackwardInput(stash->d_fc1.data(), rows, stash->d_ln2.data());
  Tensor d_x1 = Activation(rows, shape_.hidden);
  ln2_.BackwardInput(stash->d_ln2, stash->x1, stash->ln2, &d_x1);
  AddInto(dy, &d_x1);  // residual

  // Attention branch.
  stash->d_proj = Activation(rows, shape_.hidden);
  cpu::ApplyDropout(DropoutRng(DropoutSite::kAttentionOut, mb.iteration),
                    shape_.hidden_dropout, hidden_index, d_x1.numel(), d_x1.data(),
                    stash->d_proj.data());
  Tensor d_ctx = Activation(rows, shape_.heads * shape_.head_dim);
  proj_.BackwardInput(stash->d_proj.data(), rows, d_ctx.data());
  const cpu::AttentionShape attention{mb.batch, mb.seq, shape_.query_groups,
                                      shape_.heads_per_group(), shape_.head_dim};
  const CounterRng probs_rng = DropoutRng(DropoutSite::kAttentionProbs, mb.iteration);
  const cpu::AttentionDropout attention_dropout{&probs_rng, shape_.attention_dropout,
                                                mb.first_sample, 0, shape_.heads};
  stash->d_qkv = Activation(rows, shape_.qkv_width());
  cpu::AttentionBackward(attention, stash->qkv.data(), stash->probs.data(), d_ctx.data(),
                         1.0f / std::sqrt(float(shape_.head_dim)), attention_dropout,
                         stash->d_qkv.data());
  ApplyRopeToQueriesAndKeys(&stash->d_qkv, mb.seq, /*inverse=*/true);
  stash->d_ln1 = Activation(rows, shape_.hidden);
  qkv_.BackwardInput(stash->d_qkv.data(), rows, stash->d_ln1.data());
  Tensor dx = Activation(rows, shape_.hidden);
  ln1_.BackwardInput(stash->d_ln1, stash->x, stash->ln1, &dx);
  AddInto(d_x1, &dx);  // residual

  // Only the weight gradients need the rest of the stash now.
  stash->qkv = Tensor();
  stash->probs = Tensor();
  stash->fc1_out = Tensor();
  return dx;
}

void TransformerLayer::BackwardWeight(LayerStash* stash) {
  const int64_t rows = stash->x.dim(0);
  fc2_.BackwardWeight(stash->act.data(), stash->d_fc2.data(), rows);
  fc1_.BackwardWeight(stash->ln2_out.data(), stash->d_fc1.data(), rows);
  ln2_.BackwardWeight(stash->d_ln2, stash->x1, stash->ln2);
  proj_.BackwardWeight(stash->ctx.data(), stash->d_proj.data(), rows);
  qkv_.BackwardWeight(stash->ln1_out.data(), stash->d_qkv.data(), rows);
  ln1_.BackwardWeight(stash->d_ln1, stash->x, stash->ln1);
  *stash = LayerStash();
}

}  // namespace conveyor
