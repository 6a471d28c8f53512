// The decoders of a Hugging Face tokenizer.json ("decoder" key): ByteLevel,
// Replace, ByteFallback, Fuse, Strip, Metaspace and Sequence. As in the
// library, each works on the list of token strings and may join them.
#ifndef CONVEYOR_DATA_TOKENIZERS_HF_DECODERS_H_
#define CONVEYOR_DATA_TOKENIZERS_HF_DECODERS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json_fwd.hpp"

namespace conveyor {

class HfDecoder {
 public:
  virtual ~HfDecoder() = default;
  virtual absl::Status Decode(std::vector<std::string>* tokens) const = 0;
};

// nullptr for a JSON null (tokens are then joined with spaces, as the library
// does). An unsupported "type" is an error that names it.
absl::StatusOr<std::unique_ptr<HfDecoder>> ParseHfDecoder(const nlohmann::json& spec);

}  // namespace conveyor

#endif  // CONVEYOR_DATA_TOKENIZERS_HF_DECODERS_H_
