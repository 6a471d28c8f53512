#include "data/tokenizers/simple_tokenizers.h"

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace conveyor {

absl::StatusOr<std::vector<int32_t>> NullTokenizer::Tokenize(absl::string_view text) const {
  std::vector<int32_t> ids;
  for (absl::string_view word :
       absl::StrSplit(text, absl::ByAnyChar(" \t\n\r"), absl::SkipEmpty())) {
    int64_t id;
    if (!absl::SimpleAtoi(word, &id) || id < 0 || id > vocab_size_) {
      return absl::InvalidArgumentError(absl::StrCat("NullTokenizer: '", word,
                                                     "' is not a token id in [0, ", vocab_size_,
                                                     "] (text must be space-separated ids)"));
    }
    ids.push_back(int32_t(id));
  }
  return ids;
}

absl::StatusOr<std::string> NullTokenizer::Detokenize(absl::Span<const int32_t> ids) const {
  return absl::StrJoin(ids, " ");
}

absl::StatusOr<std::vector<int32_t>> ByteTokenizer::Tokenize(absl::string_view text) const {
  std::vector<int32_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
  return ids;
}

absl::StatusOr<std::string> ByteTokenizer::Detokenize(absl::Span<const int32_t> ids) const {
  std::string text;
  text.reserve(ids.size());
  for (int32_t id : ids) {
    if (id == eod()) continue;
    if (id < 0 || id > 255) {
      return absl::InvalidArgumentError(absl::StrCat("ByteTokenizer: id ", id, " is not a byte"));
    }
    text.push_back(char(id));
  }
  return text;
}

}  // namespace conveyor
