// A compiled PCRE2 pattern (UTF mode, Unicode classes, JIT) for the split
// patterns tokenizer files declare. PCRE2 rather than RE2 because those
// patterns use lookahead (\s+(?!\S)) and possessive quantifiers, which RE2
// does not support; PCRE2's syntax covers what the Oniguruma engine of Hugging
// Face `tokenizers` and the fancy-regex engine of `tiktoken` accept there.
#ifndef CONVEYOR_DATA_TOKENIZERS_PCRE2_REGEX_H_
#define CONVEYOR_DATA_TOKENIZERS_PCRE2_REGEX_H_

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace conveyor {

class Pcre2Regex {
 public:
  // `literal`: match `pattern` as plain text. Errors quote the pattern and
  // PCRE2's message with its offset.
  static absl::StatusOr<std::unique_ptr<Pcre2Regex>> Compile(const std::string& pattern,
                                                             bool literal = false);
  ~Pcre2Regex();
  Pcre2Regex(const Pcre2Regex&) = delete;
  Pcre2Regex& operator=(const Pcre2Regex&) = delete;

  // The [start, end) byte ranges of the successive non-overlapping, non-empty
  // matches in `text`, which must be valid UTF-8 (callers check it once).
  // Thread-safe.
  absl::StatusOr<std::vector<std::pair<size_t, size_t>>> FindAll(absl::string_view text) const;

  const std::string& pattern() const { return pattern_; }

 private:
  Pcre2Regex(std::string pattern, void* code) : pattern_(std::move(pattern)), code_(code) {}
  std::string pattern_;
  void* code_;  // pcre2_code_8*, kept out of the header so it need not include pcre2.h
};

}  // namespace conveyor

#endif  // CONVEYOR_DATA_TOKENIZERS_PCRE2_REGEX_H_
