// Tokenizers that need no vocabulary files.
#ifndef CONVEYOR_DATA_TOKENIZERS_SIMPLE_TOKENIZERS_H_
#define CONVEYOR_DATA_TOKENIZERS_SIMPLE_TOKENIZERS_H_

#include "data/tokenizers/tokenizer.h"

namespace conveyor {

// Megatron's NullTokenizer, for text already tokenized elsewhere: the text is
// whitespace-separated decimal ids below `vocab_size`; eod is `vocab_size`
// itself, so vocab_size() is one more than the flag value (as in Megatron).
class NullTokenizer : public Tokenizer {
 public:
  explicit NullTokenizer(int64_t vocab_size) : vocab_size_(vocab_size) {}
  absl::StatusOr<std::vector<int32_t>> Tokenize(absl::string_view text) const override;
  absl::StatusOr<std::string> Detokenize(absl::Span<const int32_t> ids) const override;
  int64_t vocab_size() const override { return vocab_size_ + 1; }
  int32_t eod() const override { return int32_t(vocab_size_); }

 private:
  int64_t vocab_size_;
};

// UTF-8 bytes as ids 0..255 and eod 256: works on any text with no files,
// at the price of long sequences.
class ByteTokenizer : public Tokenizer {
 public:
  absl::StatusOr<std::vector<int32_t>> Tokenize(absl::string_view text) const override;
  // eod decodes to nothing (it separates documents, it is not text).
  absl::StatusOr<std::string> Detokenize(absl::Span<const int32_t> ids) const override;
  int64_t vocab_size() const override { return 257; }
  int32_t eod() const override { return 256; }
};

}  // namespace conveyor

#endif  // CONVEYOR_DATA_TOKENIZERS_SIMPLE_TOKENIZERS_H_
