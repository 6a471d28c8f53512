#include "data/tokenizer_factory.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "data/gpt2_bpe_tokenizer.h"
#include "data/simple_tokenizers.h"

namespace conveyor {

absl::StatusOr<std::unique_ptr<Tokenizer>> BuildTokenizer(const TokenizerSpec& spec) {
  if (spec.type.empty()) return std::unique_ptr<Tokenizer>();
  if (spec.type == "GPT2BPETokenizer") {
    if (spec.vocab_file.empty() || spec.merge_file.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          spec.vocab_file.empty() ? "--vocab-file" : "--merge-file",
          " is missing: --tokenizer-type GPT2BPETokenizer needs --vocab-file vocab.json and "
          "--merge-file merges.txt"));
    }
    ASSIGN_OR_RETURN(std::unique_ptr<Gpt2BpeTokenizer> t,
                     Gpt2BpeTokenizer::Load(spec.vocab_file, spec.merge_file),
                     _ << "--vocab-file/--merge-file");
    return std::unique_ptr<Tokenizer>(std::move(t));
  }
  if (spec.type == "NullTokenizer") {
    if (spec.vocab_size <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--vocab-size ", spec.vocab_size,
                       " must be positive with --tokenizer-type NullTokenizer (ids are below it)"));
    }
    return std::unique_ptr<Tokenizer>(std::make_unique<NullTokenizer>(spec.vocab_size));
  }
  if (spec.type == "ByteTokenizer") {
    return std::unique_ptr<Tokenizer>(std::make_unique<ByteTokenizer>());
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--tokenizer-type ", spec.type,
                   " is not known: use GPT2BPETokenizer, NullTokenizer or ByteTokenizer"));
}

}  // namespace conveyor
