// The tokenizer a DataConfig names (proto/config.proto's tokenizer fields, which the
// trainer, preprocess and inspect_data all read, declared once): the one path from those
// settings to data/tokenizers' factory.
#ifndef CONVEYOR_DATA_TOKENIZER_SETTINGS_H_
#define CONVEYOR_DATA_TOKENIZER_SETTINGS_H_

#include <cstdint>
#include <string>

#include "data/tokenizers/tokenizer_factory.h"
#include "proto/config.pb.h"

namespace conveyor {

// --tokenizer-type, with Megatron's default: pretrain_gpt.py and preprocess_data.py
// take GPT2BPETokenizer when GPT-2's files are given; "" (no tokenizer) otherwise.
std::string EffectiveTokenizerType(const DataConfig& data);

// The factory's input for `data`'s tokenizer settings; `vocab_size` is --vocab-size
// (NullTokenizer's ids are below it; TikTokenizer's whole vocabulary).
TokenizerSpec TokenizerSpecOf(const DataConfig& data, int64_t vocab_size);

}  // namespace conveyor

#endif  // CONVEYOR_DATA_TOKENIZER_SETTINGS_H_
