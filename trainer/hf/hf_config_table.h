// The data of hf_config_fields.h: the fields of each supported config.json, one table
// per model_type plus the fields every config has. Kept apart from the code that
// checks files against them so that the tables read as the list they are.
#ifndef CONVEYOR_TRAINER_HF_HF_CONFIG_TABLE_H_
#define CONVEYOR_TRAINER_HF_HF_CONFIG_TABLE_H_

#include <string>
#include <vector>

#include "trainer/hf/hf_config_fields.h"

namespace conveyor {

// The fields of one model_type ("gpt2", "llama", "mistral", "qwen2", "qwen3").
std::vector<HfConfigField> HfFamilyFields(const std::string& model_type);

// The fields every PretrainedConfig has, and metadata transformers writes.
std::vector<HfConfigField> HfCommonFields();

// The top of docs/hf_config_fields.md.
extern const char kHfConfigFieldsPreamble[];

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_HF_HF_CONFIG_TABLE_H_
