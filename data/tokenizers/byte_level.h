// GPT-2's reversible byte -> character map used by byte-level BPE files
// (tokenizer.json's ByteLevel pre-tokenizer and decoder): printable Latin-1
// bytes stand for themselves, the others (controls, space, ...) move to
// U+0100 onwards, so every token is a printable string.
#ifndef CONVEYOR_DATA_TOKENIZERS_BYTE_LEVEL_H_
#define CONVEYOR_DATA_TOKENIZERS_BYTE_LEVEL_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace conveyor {

// Appends the stand-in characters (UTF-8) of each byte of `bytes`.
void AppendByteLevelChars(absl::string_view bytes, std::string* out);

// The bytes a token of stand-in characters spells, or false when a character
// of `token` is not a stand-in (then `*bytes` is unspecified).
bool ByteLevelBytes(absl::string_view token, std::string* bytes);

}  // namespace conveyor

#endif  // CONVEYOR_DATA_TOKENIZERS_BYTE_LEVEL_H_
