// The pre-tokenizers of a Hugging Face tokenizer.json ("pre_tokenizer" key):
// Split (the file's regex, through PCRE2), ByteLevel, Metaspace, Digits and
// Sequence. Each turns a list of pieces into a finer one; BPE then runs on
// each piece alone.
#ifndef CONVEYOR_DATA_TOKENIZERS_HF_PRE_TOKENIZERS_H_
#define CONVEYOR_DATA_TOKENIZERS_HF_PRE_TOKENIZERS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json_fwd.hpp"

namespace conveyor {

struct TextPiece {
  std::string text;
  // The piece begins at offset 0 of the original text (Metaspace's
  // prepend_scheme "first" prepends only there).
  bool at_start = false;
};

class HfPreTokenizer {
 public:
  virtual ~HfPreTokenizer() = default;
  virtual absl::Status PreTokenize(std::vector<TextPiece>* pieces) const = 0;
};

// nullptr for a JSON null. An unsupported "type" or option is an error that
// names it.
absl::StatusOr<std::unique_ptr<HfPreTokenizer>> ParseHfPreTokenizer(const nlohmann::json& spec);

}  // namespace conveyor

#endif  // CONVEYOR_DATA_TOKENIZERS_HF_PRE_TOKENIZERS_H_
