#include "data/token_id_limit.h"

#include "absl/strings/str_cat.h"

namespace conveyor {

std::optional<size_t> FirstTokenIdOutside(absl::Span<const int32_t> tokens,
                                          const TokenIdLimit& limit) {
  if (!limit.enabled()) return std::nullopt;
  // One unsigned compare catches negative ids too; the loop has no early
  // exit so that it vectorises, and the position is looked up only on error.
  const uint64_t v = uint64_t(limit.vocab_size);
  bool outside = false;
  for (int32_t id : tokens) outside |= uint64_t(int64_t{id}) >= v;
  if (!outside) return std::nullopt;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (uint64_t(int64_t{tokens[i]}) >= v) return i;
  }
  return std::nullopt;
}

absl::Status TokenIdOutsideVocabularyError(const TokenIdLimit& limit, absl::string_view source,
                                           absl::string_view where, int64_t id, int64_t largest_id,
                                           bool largest_is_exact) {
  const std::string head = absl::StrCat(source, ": ", where, " holds token id ", id);
  if (id < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        head, ", which is negative: token ids index the vocabulary [0, ", limit.vocab_size,
        "); the file does not hold token ids (re-make it with preprocess)"));
  }
  const std::string holds = largest_is_exact
                                ? absl::StrCat("the data holds id ", largest_id)
                                : absl::StrCat("the data holds ids up to at least ", largest_id);
  const std::string at_least = largest_is_exact ? "" : "at least ";
  const std::string& type = limit.tokenizer_type;
  if (type.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(head, ", outside the model's vocabulary of ", limit.vocab_size,
                     " ids (--vocab-size ", limit.vocab_size,
                     "): --vocab-size must exceed every token id: ", holds, "; pass --vocab-size ",
                     at_least, largest_id + 1, " or the --tokenizer-type the data was made with"));
  }
  if (type == "NullTokenizer") {
    // NullTokenizer's vocabulary is --vocab-size ids plus its eod, which is
    // --vocab-size itself.
    return absl::InvalidArgumentError(absl::StrCat(
        head, ", outside the model's vocabulary of ", limit.vocab_size,
        " ids (--tokenizer-type NullTokenizer: ids 0 to --vocab-size, which is its eod): ", holds,
        "; pass --vocab-size ", at_least, largest_id,
        " or the --tokenizer-type the data was made with"));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      head, ", outside the vocabulary of --tokenizer-type ", type, " (", limit.vocab_size,
      " ids): ", holds, ", so the data was not made with this tokenizer",
      " (--vocab-size does not change a tokenizer's vocabulary); pass the --tokenizer-type",
      " (and --vocab-file/--merge-file) the data was made with"));
}

}  // namespace conveyor
