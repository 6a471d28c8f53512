// The tokenizer named by --tokenizer-type, built from its files or flags.
#ifndef CONVEYOR_DATA_TOKENIZER_FACTORY_H_
#define CONVEYOR_DATA_TOKENIZER_FACTORY_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "data/tokenizer.h"

namespace conveyor {

struct TokenizerSpec {
  std::string type;                    // GPT2BPETokenizer, NullTokenizer, ByteTokenizer or empty
  std::string vocab_file, merge_file;  // GPT2BPETokenizer
  int64_t vocab_size = 0;              // NullTokenizer: ids below it (eod is vocab_size)
};

// nullptr for an empty type (data tokenized elsewhere, or mock data). Errors
// name the flag that is missing or wrong, and the file that does not load.
absl::StatusOr<std::unique_ptr<Tokenizer>> BuildTokenizer(const TokenizerSpec& spec);

}  // namespace conveyor

#endif  // CONVEYOR_DATA_TOKENIZER_FACTORY_H_
