// The multi-latent attention fields of DeepseekV3ForCausalLM's config.json (q_lora_rank,
// kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim, head_dim, qk_head_dim,
// rope_interleave) <-> Conveyor's --multi-latent-attention flags, and its multi-token
// prediction depths (num_nextn_predict_layers <-> --mtp-num-layers); the rest of the file
// is llama_config_json.h's and moe_config_json.h's.
#ifndef CONVEYOR_TRAINER_HF_MLA_CONFIG_JSON_H_
#define CONVEYOR_TRAINER_HF_MLA_CONFIG_JSON_H_

#include <map>
#include <string>

#include "data/python_json.h"
#include "proto/config.pb.h"
#include "trainer/hf/hf_architecture.h"
#include "trainer/hf/model_flags_from_file.h"

namespace conveyor {

// Sets the multi-latent attention flags `hf` fixes through `flags` (with --qk-layernorm:
// DeepSeek's latents have RMSNorms); head_dim and qk_head_dim, which transformers derives
// and reads, must be the widths the others give; num_nextn_predict_layers sets
// --mtp-num-layers. Nothing for an architecture without MLA.
void ApplyMlaConfigJson(const Json& hf, const HfArchitecture& arch, ModelFlagsFromFile* flags);

// Whether HF stores the rotated rows of `hf`'s projections interleaved (rope_interleave).
bool HfRopeInterleave(const Json& hf, const HfArchitecture& arch);

// Adds to `fields` what an export of the resolved MLA `model` as `arch` writes besides the
// Llama family's fields (overriding head_dim and num_key_value_heads). Nothing without MLA.
void AddMlaConfigJsonFields(const ModelConfig& model, const HfArchitecture& arch,
                            std::map<std::string, std::string>* fields);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_HF_MLA_CONFIG_JSON_H_
