// The config.json of a Hugging Face Llama-family folder (LlamaForCausalLM,
// MistralForCausalLM, Qwen2ForCausalLM), read into Conveyor's model flags and written
// from them; and generation_config.json.
#ifndef CONVEYOR_TRAINER_HF_LLAMA_CONFIG_JSON_H_
#define CONVEYOR_TRAINER_HF_LLAMA_CONFIG_JSON_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "data/python_json.h"
#include "proto/config.pb.h"
#include "trainer/hf/hf_architecture.h"

namespace conveyor {

// Sets the model flags of `config` that the Llama-family `hf` (read from `path`,
// named in messages) fixes: layers, hidden, ffn, heads, key/value heads, head
// dimension, rope theta, norm epsilon, tied embeddings, vocabulary, positions, and
// the architecture's switches (rope, RMSNorm, SwiGLU, no linear biases, q/k/v biases
// for Qwen2), and --make-vocab-size-divisible-by 1 unless given (so that Conveyor's
// vocabulary is the file's, unpadded where the TP size divides it). A flag already set (by the
// command line or --config) to another value is a contradiction; a feature the file asks for that
// Conveyor lacks (a RoPE type other than "default", a sliding window shorter than --seq-length,
// a layer type it does not know) is unsupported. InvalidArgument lists every one of both, naming
// the flag and the config.json key. `hf` must have passed CheckHfConfigFields
// (hf_config_fields.h), which refuses the fields Conveyor does not compute (biases, another
// activation, ...) and checks types and sizes; absent fields take `architecture`'s defaults.
absl::Status ApplyLlamaConfigJson(const Json& hf, const std::string& path,
                                  const HfArchitecture& architecture, Config* config);

// Token ids an export writes into config.json and generation_config.json; -1: null.
struct HfTokenIds {
  int64_t bos = -1;
  int64_t eos = -1;
};

// config.json as transformers' save_pretrained writes it (keys sorted, two-space
// indent) for the model of a resolved `config`, whose weights are `torch_dtype`.
std::string LlamaConfigJson(const Config& config, const HfArchitecture& architecture,
                            const HfTokenIds& ids, const std::string& torch_dtype = "float32");

// generation_config.json as transformers derives it from a model config.
std::string GenerationConfigJson(const HfTokenIds& ids);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_HF_LLAMA_CONFIG_JSON_H_
