// The tokenizer named by --tokenizer-type, built from its files or flags.
#ifndef CONVEYOR_DATA_TOKENIZERS_TOKENIZER_FACTORY_H_
#define CONVEYOR_DATA_TOKENIZERS_TOKENIZER_FACTORY_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "data/tokenizers/tokenizer.h"

namespace conveyor {

struct TokenizerSpec {
  // GPT2BPETokenizer, NullTokenizer, ByteTokenizer, HuggingFaceTokenizer,
  // SentencePieceTokenizer, GPTSentencePieceTokenizer, Llama2Tokenizer,
  // TikTokenizer, or empty.
  std::string type;
  std::string vocab_file, merge_file;  // GPT2BPETokenizer
  // NullTokenizer: ids below it (eod is vocab_size). TikTokenizer: the whole
  // vocabulary, special tokens included (0: Megatron's default, 131072).
  // Others: 0, or an upper bound the tokenizer's vocabulary must fit.
  int64_t vocab_size = 0;
  std::string tokenizer_model;   // the file (or folder) of the file-based tokenizers
  std::string tiktoken_pattern;  // TikTokenizer: v1 or v2
  int tiktoken_num_special_tokens = 1000;
  int vocab_extra_ids = 0;  // SentencePieceTokenizer
};

// nullptr for an empty type (data tokenized elsewhere, or mock data). Errors
// name the flag that is missing or wrong, and the file that does not load.
absl::StatusOr<std::unique_ptr<Tokenizer>> BuildTokenizer(const TokenizerSpec& spec);

}  // namespace conveyor

#endif  // CONVEYOR_DATA_TOKENIZERS_TOKENIZER_FACTORY_H_
