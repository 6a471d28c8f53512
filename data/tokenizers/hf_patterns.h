// A "pattern" object of tokenizer.json ({"String": "..."} or {"Regex": "..."}),
// compiled with PCRE2.
#ifndef CONVEYOR_DATA_TOKENIZERS_HF_PATTERNS_H_
#define CONVEYOR_DATA_TOKENIZERS_HF_PATTERNS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "data/tokenizers/pcre2_regex.h"
#include "nlohmann/json_fwd.hpp"

namespace conveyor {

absl::StatusOr<std::unique_ptr<Pcre2Regex>> ParseHfPattern(const nlohmann::json& pattern);

}  // namespace conveyor

#endif  // CONVEYOR_DATA_TOKENIZERS_HF_PATTERNS_H_
