// The mixture-of-experts fields of a Hugging Face config.json (MixtralConfig,
// Qwen2MoeConfig, Qwen3MoeConfig) <-> Conveyor's --num-experts and --moe-* flags; the
// rest of the file is llama_config_json.h's.
#ifndef CONVEYOR_TRAINER_HF_MOE_CONFIG_JSON_H_
#define CONVEYOR_TRAINER_HF_MOE_CONFIG_JSON_H_

#include <map>
#include <string>

#include "data/python_json.h"
#include "proto/config.pb.h"
#include "trainer/hf/hf_architecture.h"
#include "trainer/hf/model_flags_from_file.h"

namespace conveyor {

// Sets the MoE flags an MoE architecture's `hf` fixes (experts, top-k, expert width,
// which layers are MoE, the router's softmax and whether it renormalises, the shared
// expert and its gate) through `flags`, which collects contradictions. Nothing for a
// dense architecture. `hf` passed CheckHfConfigFields.
void ApplyMoeConfigJson(const Json& hf, const HfArchitecture& arch, ModelFlagsFromFile* flags);

// Adds to `fields` (config.json's keys -> JSON text) what an export of the resolved MoE
// `model` as `arch` writes besides the Llama family's fields; overrides intermediate_size
// for Mixtral (each expert's width). Nothing for a dense architecture.
void AddMoeConfigJsonFields(const ModelConfig& model, const HfArchitecture& arch,
                            std::map<std::string, std::string>* fields);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_HF_MOE_CONFIG_JSON_H_
