#include "data/tokenizer_settings.h"

namespace conveyor {

std::string EffectiveTokenizerType(const DataConfig& data) {
  if (data.tokenizer_type().empty() && (!data.vocab_file().empty() || !data.merge_file().empty())) {
    return "GPT2BPETokenizer";
  }
  return data.tokenizer_type();
}

TokenizerSpec TokenizerSpecOf(const DataConfig& data, int64_t vocab_size) {
  TokenizerSpec spec;
  spec.type = EffectiveTokenizerType(data);
  spec.vocab_file = data.vocab_file();
  spec.merge_file = data.merge_file();
  spec.vocab_size = vocab_size;
  spec.tokenizer_model = data.tokenizer_model();
  spec.tiktoken_pattern = data.tiktoken_pattern();
  spec.tiktoken_num_special_tokens = data.tiktoken_num_special_tokens();
  spec.vocab_extra_ids = data.vocab_extra_ids();
  return spec;
}

}  // namespace conveyor
