// The normalizers of a Hugging Face tokenizer.json ("normalizer" key) that
// byte-level and SentencePiece-style BPE files use: NFC, NFD, NFKC, NFKD
// (through ICU), Prepend, Replace, Lowercase and Sequence. Applied to each
// stretch of text between added tokens, as the library does.
#ifndef CONVEYOR_DATA_TOKENIZERS_HF_NORMALIZERS_H_
#define CONVEYOR_DATA_TOKENIZERS_HF_NORMALIZERS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json_fwd.hpp"

namespace conveyor {

class HfNormalizer {
 public:
  virtual ~HfNormalizer() = default;
  // `text` is valid UTF-8 and stays so.
  virtual absl::Status Normalize(std::string* text) const = 0;
};

// nullptr for a JSON null (no normalizer). An unsupported "type" is an error
// that names it.
absl::StatusOr<std::unique_ptr<HfNormalizer>> ParseHfNormalizer(const nlohmann::json& spec);

}  // namespace conveyor

#endif  // CONVEYOR_DATA_TOKENIZERS_HF_NORMALIZERS_H_
