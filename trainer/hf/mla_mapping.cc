#include "trainer/hf/mla_mapping.h"

#include "absl/strings/str_cat.h"

namespace conveyor {
namespace {

// A projection whose rows come in `blocks` blocks of `block` rows, the last `rope` of
// each a rotated part: permuted when HF stores it interleaved, else row for row.
TensorPair RopeRows(const HfMlaDims& mla, const std::string& conveyor, const std::string& hf,
                    int64_t blocks, int64_t block, int64_t rope, int64_t in) {
  const std::vector<int64_t> shape = {blocks * block, in};
  TensorPair pair{conveyor, shape, Rows::kSame, {hf}, {shape}};
  if (mla.rope_interleave) {
    pair.rows = Rows::kInterleavedRope;
    pair.rope_block = block;
    pair.rope_offset = block - rope;
  }
  return pair;
}

TensorPair SameRows(const std::string& conveyor, const std::string& hf,
                    std::vector<int64_t> shape) {
  return {conveyor, shape, Rows::kSame, {hf}, {shape}};
}

}  // namespace

HfMlaDims HfMlaDimsFromConfig(const ModelConfig& m, std::vector<std::string>* problems) {
  HfMlaDims mla;
  if (!m.multi_latent_attention()) return mla;
  mla.enabled = true;
  mla.q_lora_rank = m.q_lora_rank();
  mla.kv_lora_rank = m.kv_lora_rank();
  mla.qk_nope_head_dim = m.qk_head_dim();
  mla.qk_rope_head_dim = m.qk_pos_emb_head_dim();
  mla.v_head_dim = m.v_head_dim();
  if (!m.qk_layernorm()) {
    problems->push_back(
        "--multi-latent-attention without --qk-layernorm; DeepseekV3's latents have RMSNorms "
        "(q_a_layernorm, kv_a_layernorm)");
  }
  if (m.num_experts() <= 0) {
    problems->push_back(
        "--num-experts is unset; DeepseekV3ForCausalLM is a mixture of experts (its dense first "
        "layers: --moe-layer-freq)");
  }
  return mla;
}

void AppendMlaAttentionPairs(const HfMlaDims& mla, int64_t hidden, int64_t heads, int64_t layer,
                             std::vector<TensorPair>* pairs) {
  const std::string c = absl::StrCat("layers.", layer, ".attention.");
  const std::string h = absl::StrCat("model.layers.", layer, ".self_attn.");
  const int64_t dq = mla.q_head_dim(), dr = mla.qk_rope_head_dim;
  if (mla.q_lora_rank > 0) {
    pairs->push_back(
        SameRows(c + "q_down.weight", h + "q_a_proj.weight", {mla.q_lora_rank, hidden}));
    pairs->push_back(
        SameRows(c + "q_latent_norm.weight", h + "q_a_layernorm.weight", {mla.q_lora_rank}));
    pairs->push_back(
        RopeRows(mla, c + "q_up.weight", h + "q_b_proj.weight", heads, dq, dr, mla.q_lora_rank));
  } else {
    pairs->push_back(RopeRows(mla, c + "q.weight", h + "q_proj.weight", heads, dq, dr, hidden));
  }
  pairs->push_back(RopeRows(mla, c + "kv_down.weight", h + "kv_a_proj_with_mqa.weight", 1,
                            mla.kv_lora_rank + dr, dr, hidden));
  pairs->push_back(
      SameRows(c + "kv_latent_norm.weight", h + "kv_a_layernorm.weight", {mla.kv_lora_rank}));
  pairs->push_back(SameRows(c + "kv_up.weight", h + "kv_b_proj.weight",
                            {heads * (mla.qk_nope_head_dim + mla.v_head_dim), mla.kv_lora_rank}));
}

int64_t InterleavedRopeRow(const TensorPair& pair, int64_t r) {
  const int64_t block = pair.rope_block, offset = pair.rope_offset;
  const int64_t w = r % block;
  if (w < offset) return r;
  const int64_t half = (block - offset) / 2, j = w - offset;
  const int64_t hf = j < half ? 2 * j : 2 * (j - half) + 1;
  return r - w + offset + hf;
}

}  // namespace conveyor
