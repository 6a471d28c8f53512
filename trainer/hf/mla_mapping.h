// Multi-latent attention's projections in Hugging Face's DeepseekV3ForCausalLM <->
// Conveyor's (model/mla_attention.h). Both compute, per token with normed input h,
//   c_q = q_a_layernorm(q_a_proj h); q = q_b_proj c_q   (or q = q_proj h: q_lora_rank null)
//   [c_kv | k_pe] = kv_a_proj_with_mqa h;  [k_nope | v]_head = (kv_b_proj kv_a_layernorm(c_kv))
// with each query head [q_nope | q_pe], and o_proj over the heads' values. Conveyor's
// q_down, q_latent_norm, q_up (or q), kv_down, kv_latent_norm, kv_up and proj hold the
// same rows in the same order, with one exception: the rotated parts. transformers
// (rope_interleave, true by default and in DeepSeek's files) rotates q_pe and k_pe as
// interleaved pairs (apply_rotary_pos_emb_interleave: channel 2j pairs with 2j + 1), and
// Conveyor's RoPE pairs halves (j with j + d/2, runtime/cpu/rope.cc). Permuting the rows
// that produce q_pe (in every head of q_b_proj / q_proj) and k_pe (the last rows of
// kv_a_proj_with_mqa) so that Conveyor's row j is HF's 2j and row d/2 + j is 2j + 1 makes
// the two rotations one: the pair (2j, 2j+1) at frequency j becomes (j, d/2 + j). The dot
// products of queries and keys are sums over channels, so the order itself changes
// nothing else. With rope_interleave false the rows map one to one.
#ifndef CONVEYOR_TRAINER_HF_MLA_MAPPING_H_
#define CONVEYOR_TRAINER_HF_MLA_MAPPING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "proto/config.pb.h"
#include "trainer/hf/tensor_pairs.h"

namespace conveyor {

struct HfMlaDims {
  bool enabled = false;
  int64_t q_lora_rank = 0;  // 0: q_proj, no query latent
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;
  bool rope_interleave = true;  // HF's rotated rows are in interleaved order

  int64_t q_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
};

// The widths of a model with --multi-latent-attention (enabled false without). Appends
// to `problems` what DeepseekV3's attention does not compute, naming the flag: its
// latents always have RMSNorms (--qk-layernorm).
HfMlaDims HfMlaDimsFromConfig(const ModelConfig& model, std::vector<std::string>* problems);

// Appends the pairs of layer `layer`'s attention projections but the output's.
void AppendMlaAttentionPairs(const HfMlaDims& mla, int64_t hidden, int64_t heads, int64_t layer,
                             std::vector<TensorPair>* pairs);

// The row of the HF tensor that Conveyor's row `r` of a kInterleavedRope pair holds.
int64_t InterleavedRopeRow(const TensorPair& pair, int64_t r);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_HF_MLA_MAPPING_H_
