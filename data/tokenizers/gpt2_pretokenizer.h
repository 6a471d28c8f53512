// GPT-2's pre-tokenization: the split of text into words before BPE, i.e.
// matches of the pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// implemented by hand (no Unicode regex engine ships with the system), with
// ICU supplying the Unicode letter/number/space classes.
#ifndef CONVEYOR_DATA_TOKENIZERS_GPT2_PRETOKENIZER_H_
#define CONVEYOR_DATA_TOKENIZERS_GPT2_PRETOKENIZER_H_

#include <vector>

#include "absl/strings/string_view.h"

namespace conveyor {

// The pieces of `text`, in order; they concatenate back to `text`. Bytes that
// are not valid UTF-8 each count as one symbol character.
std::vector<absl::string_view> Gpt2PreTokenize(absl::string_view text);

}  // namespace conveyor

#endif  // CONVEYOR_DATA_TOKENIZERS_GPT2_PRETOKENIZER_H_
