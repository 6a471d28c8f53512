// The positions and attention window of a Llama-family config.json, both ways:
// rope_scaling (or transformers 5's rope_parameters) of type "llama3" or "yarn", and
// Mistral's and Qwen2/Qwen3's sliding_window (with use_sliding_window,
// max_window_layers and layer_types), read into Conveyor's flags (--use-rope-scaling,
// --position-embedding-type yarn, --window-size, --window-attn-skip-freq) and written
// from them, with transformers' configuration classes and modeling files as the
// definition (runtime/rope_scaling.h gives the formulas).
#ifndef CONVEYOR_TRAINER_HF_POSITIONS_CONFIG_JSON_H_
#define CONVEYOR_TRAINER_HF_POSITIONS_CONFIG_JSON_H_

#include <map>
#include <string>

#include "absl/status/status.h"
#include "data/python_json.h"
#include "proto/config.pb.h"
#include "trainer/hf/hf_architecture.h"
#include "trainer/hf/model_flags_from_file.h"

namespace conveyor {

// Sets the RoPE flags the file's scaling asks for and returns the position embedding
// type it implies ("rope", or "yarn"); another scaling type is unsupported.
std::string ApplyRopeScalingJson(const Json& hf, const HfArchitecture& arch,
                                 ModelFlagsFromFile* flags);

// Sets --window-size (sliding_window - 1, 0) and, when only some layers slide,
// --window-attn-skip-freq, for a window shorter than `seq_length` (a longer one is
// plain causal attention and sets nothing).
void ApplySlidingWindowJson(const Json& hf, const HfArchitecture& arch, int64_t seq_length,
                            ModelFlagsFromFile* flags);

// FailedPrecondition when `arch`'s config.json cannot say the model's window or
// scaling (a window in Llama, which has none; layers sliding in a pattern the class
// cannot give).
absl::Status CheckPositionsExportable(const Config& config, const HfArchitecture& arch);

// config.json's rope_scaling and sliding-window fields for a model that passed
// CheckPositionsExportable.
void AddPositionsConfigJsonFields(const ModelConfig& m, const HfArchitecture& arch,
                                  std::map<std::string, std::string>* fields);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_HF_POSITIONS_CONFIG_JSON_H_
