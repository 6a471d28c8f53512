// UTF-8 helpers the tokenizers share: validation with the offending offset,
// character lengths, and the lossy conversion decoders apply to byte output.
#ifndef CONVEYOR_DATA_UTF8_TEXT_H_
#define CONVEYOR_DATA_UTF8_TEXT_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace conveyor {

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

#endif  // CONVEYOR_DATA_UTF8_TEXT_H_
