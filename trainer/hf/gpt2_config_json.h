// The config.json of a Hugging Face GPT-2 directory: written from a Conveyor config,
// and checked against one before importing weights.
#ifndef CONVEYOR_TRAINER_HF_GPT2_CONFIG_JSON_H_
#define CONVEYOR_TRAINER_HF_GPT2_CONFIG_JSON_H_

#include <string>

#include "absl/status/status.h"
#include "data/python_json.h"
#include "proto/config.pb.h"
#include "trainer/hf/gpt2_mapping.h"

namespace conveyor {

// GPT2Config's fields for `config` (which must pass CheckGpt2Architecture):
// architectures GPT2LMHeadModel, gelu_new (Conveyor's GELU is the tanh form), tied
// embeddings, the real vocabulary, n_positions = max_position_embeddings, and
// bos/eos = the last token id, which is the end-of-document token of GPT-2's BPE and
// of Conveyor's other tokenizers; torch_dtype names the weights' element type.
std::string Gpt2ConfigJson(const Config& config, const Gpt2Dims& dims,
                           const std::string& torch_dtype = "float32");

// OK when the HF config `hf` (read from `path`, named in messages) describes the
// model `dims` and `config` configure; otherwise InvalidArgument listing every
// difference with the flag to change. HF's position table may be longer than
// Conveyor needs, not shorter. The fields that need no model (activation, ties,
// attention scaling, types and bounds) are hf_config_fields.h's, checked before.
absl::Status CheckGpt2ConfigJson(const Json& hf, const std::string& path, const Config& config,
                                 const Gpt2Dims& dims);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_HF_GPT2_CONFIG_JSON_H_
