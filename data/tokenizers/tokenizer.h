// The tokenizer interface the data pipeline uses: text to token ids and back,
// plus the end-of-document id appended between documents.
#ifndef CONVEYOR_DATA_TOKENIZERS_TOKENIZER_H_
#define CONVEYOR_DATA_TOKENIZERS_TOKENIZER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace conveyor {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Thread-safe: preprocessing calls it from several workers at once.
  virtual absl::StatusOr<std::vector<int32_t>> Tokenize(absl::string_view text) const = 0;
  virtual absl::StatusOr<std::string> Detokenize(absl::Span<const int32_t> ids) const = 0;
  // Number of ids, eod included.
  virtual int64_t vocab_size() const = 0;
  virtual int32_t eod() const = 0;
};

}  // namespace conveyor

#endif  // CONVEYOR_DATA_TOKENIZERS_TOKENIZER_H_
