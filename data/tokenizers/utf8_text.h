// UTF-8 helpers the data tools share: validation with the offending offset,
// character lengths, encoding, and the lossy conversion decoders apply to byte output.
#ifndef CONVEYOR_DATA_TOKENIZERS_UTF8_TEXT_H_
#define CONVEYOR_DATA_TOKENIZERS_UTF8_TEXT_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace conveyor {

// Length (1-4) of the well-formed UTF-8 sequence that starts `text`, or 0 when
// none does. Well-formed as Python's strict decoder has it: no overlong forms,
// no surrogates, nothing above U+10FFFF, no truncated sequence.
int Utf8SequenceLength(absl::string_view text);

// Offset of the first byte of `text` that is not part of well-formed UTF-8, or
// absl::string_view::npos when all of it is.
size_t FindInvalidUtf8(absl::string_view text);

// InvalidArgument naming the byte offset of the first ill-formed sequence
// (overlong forms, surrogates and code points above U+10FFFF included).
absl::Status CheckUtf8(absl::string_view text);

// Length in bytes of the character starting at text[i] (1 for a stray byte).
size_t Utf8CharLength(absl::string_view text, size_t i);

// Appends code point `cp` encoded as UTF-8.
void AppendCodePoint(uint32_t cp, std::string* out);

// `bytes` with each maximal ill-formed subsequence replaced by U+FFFD, the
// practice of Unicode §3.9 that Rust's from_utf8_lossy and Python's
// decode(errors="replace") follow, so decoded text matches theirs.
std::string Utf8Lossy(absl::string_view bytes);

}  // namespace conveyor

#endif  // CONVEYOR_DATA_TOKENIZERS_UTF8_TEXT_H_
