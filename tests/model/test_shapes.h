// Small model shapes for the model tests: big enough to exercise grouped heads,
// several samples and every option, small enough for finite differences.
#ifndef CONVEYOR_TESTS_MODEL_TEST_SHAPES_H_
#define CONVEYOR_TESTS_MODEL_TEST_SHAPES_H_

#include <string>

#include "model/model_shape.h"

namespace conveyor::testing_util {

struct ShapeVariant {
  std::string name;
  ModelShape shape;
};

inline ModelShape TinyShape() {
  ModelShape s;
  s.num_layers = 2;
  s.hidden = 16;
  s.heads = 4;
  s.query_groups = 2;
  s.head_dim = 4;
  s.ffn_hidden = 24;
  s.seq = 6;
  s.max_positions = 8;
  s.padded_vocab = 32;
  // Larger than Megatron's 0.02 so that every term of the gradient is well above the
  // finite-difference noise.
  s.init_std = 0.3f;
  return s;
}

// Multi-latent attention (DeepSeek-V2) on TinyShape: a query latent of q_lora_rank (0:
// none), a key/value latent of 5, heads of 3 + 4 rotated query/key dims and 5 value
// dims (so values are narrower than queries and keys), the latents' norms under
// --qk-layernorm.
inline ModelShape MlaShapeOf(int64_t q_lora_rank, bool latent_norms) {
  ModelShape s = TinyShape();
  s.rope = true;
  s.rms_norm = true;
  s.linear_bias = false;
  s.qk_layernorm = latent_norms;
  s.UseMla({/*enabled=*/true, q_lora_rank, /*kv_lora_rank=*/5, /*qk_head_dim=*/3,
            /*qk_pos_emb_head_dim=*/4, /*v_head_dim=*/5});
  return s;
}

// Every architecture option, one at a time and all at once.
inline std::vector<ShapeVariant> ShapeVariants() {
  std::vector<ShapeVariant> v;
  v.push_back({"gpt2_like", TinyShape()});
  ModelShape s = TinyShape();
  s.rope = true;
  v.push_back({"rope", s});
  s = TinyShape();
  s.rms_norm = true;
  v.push_back({"rmsnorm", s});
  s = TinyShape();
  s.swiglu = true;
  v.push_back({"swiglu", s});
  s = TinyShape();
  s.squared_relu = true;
  v.push_back({"squared_relu", s});
  s = TinyShape();
  s.tied_embeddings = false;
  s.linear_bias = false;
  v.push_back({"untied_no_bias", s});
  s = TinyShape();
  s.query_groups = 4;
  v.push_back({"multi_head", s});
  s = TinyShape();
  s.hidden_dropout = 0.2f;
  s.attention_dropout = 0.3f;
  v.push_back({"dropout", s});
  s = TinyShape();
  s.rope = true;
  s.rotary_percent = 0.5f;  // --rotary-percent: half of each head rotates
  s.linear_bias = false;
  s.qkv_bias = true;  // --add-qkv-bias (Qwen2)
  v.push_back({"partial_rope_qkv_bias", s});
  s = TinyShape();
  s.no_positions = true;  // --position-embedding-type none
  v.push_back({"no_positions", s});
  s = TinyShape();
  s.qk_layernorm = true;  // LayerNorm over each query and key head
  v.push_back({"qk_layernorm", s});
  s = TinyShape();
  s.rope = true;
  s.rms_norm = true;
  s.qk_layernorm = true;  // RMSNorm before RoPE (Qwen3, OLMo 2)
  v.push_back({"qk_rmsnorm_rope", s});
  s = TinyShape();
  s.rope = true;
  s.rms_norm = true;
  s.swiglu = true;
  s.tied_embeddings = false;
  s.linear_bias = false;
  s.query_groups = 1;
  s.hidden_dropout = 0.1f;
  s.attention_dropout = 0.1f;
  v.push_back({"llama_like", s});
  v.push_back({"mla", MlaShapeOf(/*q_lora_rank=*/6, /*latent_norms=*/true)});
  v.push_back({"mla_no_query_latent", MlaShapeOf(/*q_lora_rank=*/0, /*latent_norms=*/false)});
  return v;
}

}  // namespace conveyor::testing_util

#endif  // CONVEYOR_TESTS_MODEL_TEST_SHAPES_H_
