// The Hugging Face architectures Conveyor reads and writes, one table: the class
// name config.json's "architectures" holds, its "model_type", and how its weights
// differ from Llama's. GPT-2 has its own mapping (gpt2_mapping.h); Llama, Mistral and
// Qwen2 share one (llama_mapping.h): a Llama-family decoder is RMSNorm, rotary
// positions, SwiGLU and grouped-query attention with bias-free linears, Qwen2 adding
// biases on q, k and v only, Qwen3 an RMSNorm over each query and key head
// (--qk-layernorm); Mixtral, Qwen2-MoE and Qwen3-MoE are those with mixture-of-experts
// MLPs (moe_mapping.h); DeepSeek-V3 is a Llama-family MoE decoder with multi-latent
// attention (mla_mapping.h).
#ifndef CONVEYOR_TRAINER_HF_HF_ARCHITECTURE_H_
#define CONVEYOR_TRAINER_HF_HF_ARCHITECTURE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/python_json.h"
#include "proto/config.pb.h"

namespace conveyor {

enum class HfFamily { kGpt2, kLlama };

struct HfArchitecture {
  const char* class_name;  // "LlamaForCausalLM"
  const char* model_type;  // "llama"
  HfFamily family;
  bool qkv_bias;  // Llama family: biases on q/k/v (Qwen2); none elsewhere
  bool qk_norm;   // Llama family: q_norm and k_norm per head (Qwen3)
  bool moe = false;  // Llama family: mixture-of-experts MLPs (moe_mapping.h)
  bool mla = false;  // Llama family: multi-latent attention (mla_mapping.h)
};

// Every supported architecture, GPT-2 first.
const std::vector<HfArchitecture>& HfArchitectures();

// The architecture a config.json names ("architectures"[0], else "model_type");
// InvalidArgument naming `path`, what it holds and the supported ones otherwise.
absl::StatusOr<const HfArchitecture*> HfArchitectureOf(const Json& hf_config,
                                                       const std::string& path);

// The architecture an export of a model with `config` writes: `requested` (a class
// name) when given, else GPT2LMHeadModel for GPT-2's architecture, Qwen3ForCausalLM
// with --qk-layernorm, Qwen2ForCausalLM with --add-qkv-bias, MistralForCausalLM with
// --window-size, else LlamaForCausalLM (with
// --num-experts: Qwen3MoeForCausalLM, Qwen2MoeForCausalLM, MixtralForCausalLM; with
// --multi-latent-attention DeepseekV3ForCausalLM). FailedPrecondition when `requested`
// cannot hold the model (GPT-2 for a Llama-family model, Qwen2 without q/k/v biases,
// ...); InvalidArgument for an unknown name.
absl::StatusOr<const HfArchitecture*> HfArchitectureForExport(const Config& config,
                                                              const std::string& requested);

// The supported class names, for messages.
std::string SupportedHfArchitectures();

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_HF_HF_ARCHITECTURE_H_
