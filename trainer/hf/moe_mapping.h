// The mixture-of-experts layers of Hugging Face's Llama-family MoE decoders
// (MixtralForCausalLM, Qwen2MoeForCausalLM, Qwen3MoeForCausalLM) <-> Conveyor's MoE
// layers (model/moe_layer.h): the rest of each layer is stored as llama_mapping.h says.
//
// Both compute, per token x of an MoE layer, with router logits l = x G^T:
//   y = sum over the top-k experts e of p_e * down_e(silu(gate_e x) * up_e x)
//       (+ sigmoid(x g^T) * shared(x), Qwen2-MoE's gated shared expert)
// with p the softmax over all experts' logits restricted to the top k, renormalised to sum
// 1 (Mixtral; Qwen's norm_topk_prob), or not (Qwen's default: Megatron's
// --moe-router-pre-softmax). Only the storage differs: HF keeps each expert's gate and up
// projections apart (Mixtral's w1 and w3, Qwen's gate_proj and up_proj), Conveyor's fc1 is
// [gate | up]; the router, down projections, shared expert gate are row for row. Dense
// layers of a Qwen MoE model (mlp_only_layers, decoder_sparse_step) keep the dense MLP's
// names.
#ifndef CONVEYOR_TRAINER_HF_MOE_MAPPING_H_
#define CONVEYOR_TRAINER_HF_MOE_MAPPING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "proto/config.pb.h"
#include "trainer/hf/tensor_pairs.h"

namespace conveyor {

// Which HF names an MoE layer's tensors have.
enum class HfMoeNames {
  kMixtral,   // model.layers.N.block_sparse_moe.{gate, experts.E.w1/w3/w2}
  kQwen,      // model.layers.N.mlp.{gate, experts.E.*_proj, shared_expert.*, shared_expert_gate}
  kDeepseek,  // model.layers.N.mlp.{gate, gate.e_score_correction_bias, experts.E.*_proj,
              // shared_experts.*}
};

struct HfMoeDims {
  int64_t experts = 0;      // 0: a dense model
  int64_t ffn = 0;          // each routed expert's width
  int64_t shared_ffn = 0;   // the shared expert's width; 0: none
  bool shared_gate = false; // the shared expert's output scaled by a sigmoid gate
  bool expert_bias = false;  // DeepSeek-V3's e_score_correction_bias (Conveyor's state
                             // layers.N.mlp.router.expert_bias)
  HfMoeNames names = HfMoeNames::kMixtral;
  std::vector<bool> layers;  // per layer: MoE (true) or dense

  bool IsMoeLayer(int64_t layer) const {
    return experts > 0 && layer < static_cast<int64_t>(layers.size()) && layers[layer];
  }
};

// How many of an expert group's best biased scores DeepseekV3TopkRouter sums to score
// the group (transformers' modeling_deepseek_v3.py: topk(2)).
inline constexpr int64_t kDeepseekGroupScoreTopk = 2;

// The MoE sizes of a resolved Llama-family `model` (experts == 0 when dense). Its names are
// DeepSeek-V3's with multi-latent attention, Qwen's when the attention is Qwen's
// (--add-qkv-bias: Qwen2-MoE, --qk-layernorm: Qwen3-MoE), else Mixtral's. DeepSeek-V3's
// router takes sigmoid scores with an expert bias, its group-limited routing scores a group
// by its two best experts (--moe-router-group-score-topk, by default topk / group_topk), its dense
// layers come first and its shared experts have no gate; a setting it lacks is a problem. Appends
// to `problems` every MoE setting the matching HF architecture does not compute, naming the flag:
// another score function, a scaling factor, an expert bias; for Mixtral pre-softmax weights, dense
// layers or a shared expert; for Qwen3-MoE a shared expert; for Qwen2-MoE a shared expert missing
// or without its gate.
HfMoeDims HfMoeDimsFromConfig(const ModelConfig& model, std::vector<std::string>* problems);

// Appends the pairs of MoE layer `layer`'s MLP (router, experts, shared expert and gate)
// for a model of width `hidden`.
void AppendMoeLayerPairs(const HfMoeDims& moe, int64_t hidden, int64_t layer,
                         std::vector<TensorPair>* pairs);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_HF_MOE_MAPPING_H_
