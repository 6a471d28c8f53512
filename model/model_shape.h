// The GPT architecture as plain numbers, resolved from the config once
// (ResolvedConfig::model_shape(), trainer/config/resolved_config.h), so the layers never look
// at flags (and tests can build models without a Config).
#ifndef CONVEYOR_MODEL_MODEL_SHAPE_H_
#define CONVEYOR_MODEL_MODEL_SHAPE_H_

#include <cmath>
#include <cstdint>
#include <vector>

#include "model/moe_shape.h"
#include "runtime/rope_scaling.h"

namespace conveyor {

// Multi-latent attention (DeepSeek-V2, Liu et al. 2024, §2.1; Megatron's
// --multi-latent-attention): queries and keys/values come from low-rank latents, and
// every head's key carries one RoPE part shared by all heads. Per token x:
//   c_q = W_dq x (q_lora_rank wide; without it q comes from x directly, W_q x)
//   [q_nope | q_rope]_h = (W_uq norm(c_q))_h        qk_head_dim | qk_pos_emb_head_dim
//   [c_kv | k_rope] = W_dkv x                       kv_lora_rank | qk_pos_emb_head_dim
//   [k_nope | v]_h = (W_ukv norm(c_kv))_h           qk_head_dim | v_head_dim
//   q_h = [rope(q_rope)_h, q_nope_h],  k_h = [rope(k_rope), k_nope_h]
// (the norms only under --qk-layernorm, as Megatron builds them), and the softmax scale
// 1 / sqrt(qk_head_dim + qk_pos_emb_head_dim), times YaRN's m(s, mscale_all_dim)^2.
struct MlaShape {
  bool enabled = false;
  int64_t q_lora_rank = 0;  // 0: q = W_q x, no query latent
  int64_t kv_lora_rank = 0;
  int64_t qk_head_dim = 0;          // the part of each query and key head without RoPE
  int64_t qk_pos_emb_head_dim = 0;  // the rotated part (the key's shared by all heads)
  int64_t v_head_dim = 0;

  int64_t q_head_dim() const { return qk_head_dim + qk_pos_emb_head_dim; }
};

struct ModelShape {
  int64_t num_layers = 2;
  int64_t hidden = 64;
  int64_t ffn_hidden = 256;
  int64_t heads = 4;
  int64_t query_groups = 4;
  int64_t head_dim = 16;
  int64_t seq = 32;
  int64_t padded_vocab = 128;
  int64_t max_positions = 32;
  bool rope = false;
  bool no_positions = false;  // --position-embedding-type none: neither RoPE nor a table
  float rotary_base = 10000.0f;
  float rotary_percent = 1.0f;  // of head_dim: rotary_dims() are rotated, the rest not
  RopeScaling rope_scaling;     // Llama 3.1's or YaRN's frequencies (rope only)
  // Sliding-window attention (Megatron's --window-size (w, 0)): layer l's queries see the
  // keys at most layer_windows[l] positions back, -1 unbounded; empty: none slides.
  std::vector<int64_t> layer_windows;
  bool rms_norm = false;
  float norm_epsilon = 1e-5f;
  bool swiglu = false;
  bool squared_relu = false;  // relu(x)^2 instead of GELU in the (dense) MLP; not with swiglu
  bool tied_embeddings = true;
  bool linear_bias = true;
  bool qkv_bias = false;  // the qkv projection's bias even without linear_bias (Qwen2)
  bool qk_layernorm = false;  // a norm over each query and key head before RoPE
  float init_std = 0.02f;
  float hidden_dropout = 0.0f;
  float attention_dropout = 0.0f;

  MoeShape moe;  // mixture of experts (--num-experts); moe.experts() == 0: dense

  // DeepSeek-V3's multi-token prediction (model/mtp_block.h): D = mtp_layers depths
  // after the last layer (--mtp-num-layers; 0: none), their mean loss weighted by
  // mtp_loss_scaling / D (--mtp-loss-scaling-factor, lambda).
  int64_t mtp_layers = 0;
  float mtp_loss_scaling = 0.1f;
  // Multi-latent attention in every layer. Its attention input then has a query group per
  // head (query_groups == heads) and head_dim == mla.q_head_dim(): UseMla sets both.
  MlaShape mla;

  void UseMla(const MlaShape& m) {
    mla = m;
    query_groups = heads;
    head_dim = m.q_head_dim();
  }

  int64_t heads_per_group() const { return heads / query_groups; }
  // Megatron's scaled init of the output projections (attention's and the MLPs' last
  // linear), std / sqrt(2 * num_layers): keeps the residual stream's variance from growing
  // with depth.
  float output_init_std() const {
    return init_std / std::sqrt(2.0f * static_cast<float>(num_layers));
  }
  // The value (and context) heads' width: head_dim, or MLA's v_head_dim.
  int64_t value_head_dim() const { return mla.enabled ? mla.v_head_dim : head_dim; }
  // The attention input's row (runtime/op_params.h's grouped layout); under MLA what its
  // projections pack, not a weight's width.
  int64_t qkv_width() const {
    return (heads + query_groups) * head_dim + query_groups * value_head_dim();
  }
  int64_t fc1_width() const { return swiglu ? 2 * ffn_hidden : ffn_hidden; }
  bool has_qkv_bias() const { return linear_bias || qkv_bias; }
  bool learned_positions() const { return !rope && !no_positions; }
  // Megatron's rotary dimension: int(kv_channels * rotary_percent); under MLA the
  // decoupled RoPE part.
  int64_t rotary_dims() const {
    if (mla.enabled) return mla.qk_pos_emb_head_dim;
    return static_cast<int64_t>(static_cast<double>(head_dim) * rotary_percent);
  }
  int64_t WindowOf(int64_t layer) const {
    return layer < static_cast<int64_t>(layer_windows.size()) ? layer_windows[layer] : -1;
  }
};

// Elements of the activation a pipeline stage sends to the next for one micro-batch of
// `tokens` (and of the gradient sent back): tokens x hidden, or under sequence
// parallelism this rank's 1/tp_size shard of the tokens.
int64_t PipelineMessageElements(int64_t tokens, int64_t hidden, int tp_size,
                                bool sequence_parallel);

}  // namespace conveyor

#endif  // CONVEYOR_MODEL_MODEL_SHAPE_H_
