#include "data/tokenizers/hf_patterns.h"

#include <string>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"

namespace conveyor {

absl::StatusOr<std::unique_ptr<Pcre2Regex>> ParseHfPattern(const nlohmann::json& pattern) {
  if (pattern.contains("String")) {
    return Pcre2Regex::Compile(pattern.at("String").get<std::string>(), /*literal=*/true);
  }
  if (pattern.contains("Regex")) {
    return Pcre2Regex::Compile(pattern.at("Regex").get<std::string>());
  }
  return absl::InvalidArgumentError(
      "a pattern must be {\"String\": ...} or {\"Regex\": ...}, got " + pattern.dump());
}

}  // namespace conveyor
