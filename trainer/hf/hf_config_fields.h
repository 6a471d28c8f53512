// Every field of the config.json of each supported Hugging Face architecture, and what
// Conveyor does with it, as data: one table per model_type, read from transformers'
// configuration classes (GPT2Config, LlamaConfig, MistralConfig, Qwen2Config,
// Qwen3Config) and their modeling files' use of each field. A field is
//   honoured: it sets a Conveyor flag (Llama family) or is checked against one (GPT-2);
//   refused unless it holds a value Conveyor computes (named, with the values allowed);
//   ignored: the model's function cannot depend on it (the note says why).
// A field the table does not know is reported in one warning line. Sizes are bounded
// before anything is allocated for them. docs/hf_config_fields.md is this table
// rendered by HfConfigFieldsMarkdown; a test keeps the two equal.
#ifndef CONVEYOR_TRAINER_HF_HF_CONFIG_FIELDS_H_
#define CONVEYOR_TRAINER_HF_HF_CONFIG_FIELDS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "data/python_json.h"
#include "trainer/config/size_limits.h"
#include "trainer/hf/hf_architecture.h"

namespace conveyor {

enum class HfFieldUse { kHonoured, kRefusedUnlessAllowed, kIgnored };

// The JSON type a field must have when present (kAny: not checked, for ignored fields).
enum class HfJsonType {
  kAny,
  kInteger,
  kIntegerOrNull,
  kNumber,
  kBool,
  kString,
  kStringArray,
  kObjectOrNull,
  kArrayOrNull,
};

struct HfConfigField {
  std::string key;
  HfFieldUse use = HfFieldUse::kIgnored;
  HfJsonType type = HfJsonType::kAny;
  std::string hf_default;            // transformers' default as JSON text; "" when derived
  std::vector<std::string> allowed;  // kRefusedUnlessAllowed: the values (JSON text) Conveyor
                                     // computes; absence (transformers' default) is one of them
  const SizeLimit* limit = nullptr;  // a size: a positive integer within this shared limit
                                     // (trainer/config/size_limits.h, as for the flags)
  bool required = false;             // the file must give it (or its alias)
  std::string alias_of;              // another name of that field (GPT2Config.attribute_map)
  std::string note;                  // honoured: the Conveyor setting; else why
};

// The table of `arch`'s model_type: its own fields, then those every config has.
const std::vector<HfConfigField>& HfConfigFields(const HfArchitecture& arch);

// The field `key` of `arch`'s table; null when the table does not know it.
const HfConfigField* FindHfConfigField(const HfArchitecture& arch, absl::string_view key);

// The value of `key` in `hf` (under its own name or an alias), null when absent.
const Json* FindWithAliases(const Json& hf, const HfArchitecture& arch,
                                 absl::string_view key);

// The value of `key` in `hf`, or transformers' default from the table when absent (a
// null value when the default is derived from other fields, or unknown).
Json HfFieldOrDefault(const Json& hf, const HfArchitecture& arch, absl::string_view key);

// `value` as short JSON text for messages ("64.5", "\"64\"", "[...]").
std::string JsonValueText(const Json& value);

// Checks config.json `hf` (read from `path`) against `arch`'s table: every present
// field's JSON type, every size's bound, every refused field's value, every required
// field's presence. InvalidArgument listing each problem, naming the file, the key,
// the value and what Conveyor expects or supports. Keys the table does not know are
// named in one line added to `warnings` (when not null).
absl::Status CheckHfConfigFields(const Json& hf, const std::string& path,
                                 const HfArchitecture& arch, std::vector<std::string>* warnings);

// docs/hf_config_fields.md: every table as Markdown.
std::string HfConfigFieldsMarkdown();

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_HF_HF_CONFIG_FIELDS_H_
