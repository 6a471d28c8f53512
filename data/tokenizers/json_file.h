// Reading a whole JSON file (tokenizer.json, tokenizer_config.json, rank
// files) with nlohmann-json (Debian's nlohmann-json3-dev): its error messages
// give the byte position, and its object model is convenient for files that
// are read once at startup.
#ifndef CONVEYOR_DATA_TOKENIZERS_JSON_FILE_H_
#define CONVEYOR_DATA_TOKENIZERS_JSON_FILE_H_

#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace conveyor {

// NotFound when `path` cannot be read; InvalidArgument naming the file and the
// position when it is not JSON.
absl::StatusOr<nlohmann::json> ReadJsonFile(const std::string& path);

}  // namespace conveyor

#endif  // CONVEYOR_DATA_TOKENIZERS_JSON_FILE_H_
