#include "data/tokenizers/gpt2_pretokenizer.h"

#include <unicode/uchar.h>

#include <cstdint>

namespace conveyor {
namespace {

enum class CharClass { kLetter, kNumber, kSpace, kOther };

struct Char {
  size_t begin;  // byte offset in the text
  size_t size;   // bytes
  uint32_t cp;
  CharClass cls;
};

CharClass Classify(uint32_t cp) {
  switch (u_charType(UChar32(cp))) {
    case U_UPPERCASE_LETTER:
    case U_LOWERCASE_LETTER:
    case U_TITLECASE_LETTER:
    case U_MODIFIER_LETTER:
    case U_OTHER_LETTER:
      return CharClass::kLetter;
    case U_DECIMAL_DIGIT_NUMBER:
    case U_LETTER_NUMBER:
    case U_OTHER_NUMBER:
      return CharClass::kNumber;
    default:
      return u_isUWhiteSpace(UChar32(cp)) ? CharClass::kSpace : CharClass::kOther;
  }
}

// Decodes UTF-8; an invalid byte becomes a one-byte "other" character.
std::vector<Char> Decode(absl::string_view text) {
  std::vector<Char> chars;
  chars.reserve(text.size());
  size_t i = 0;
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  while (i < text.size()) {
    const unsigned char b = byte(i);
    size_t len = b < 0x80           ? 1
                 : (b >> 5) == 0x6  ? 2
                 : (b >> 4) == 0xE  ? 3
                 : (b >> 3) == 0x1E ? 4
                                    : 0;
    uint32_t cp = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
    bool ok = len > 0 && i + len <= text.size();
    for (size_t k = 1; ok && k < len; ++k) {
      if ((byte(i + k) & 0xC0) != 0x80) ok = false;
      cp = (cp << 6) | (byte(i + k) & 0x3F);
    }
    if (!ok) {
      chars.push_back({i, 1, b, CharClass::kOther});
      ++i;
      continue;
    }
    chars.push_back({i, len, cp, Classify(cp)});
    i += len;
  }
  return chars;
}

// Length in characters of the contraction at `i`, or 0.
size_t ContractionAt(const std::vector<Char>& c, size_t i) {
  if (c[i].cp != '\'' || i + 1 >= c.size()) return 0;
  const uint32_t a = c[i + 1].cp;
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (i + 2 < c.size()) {
    const uint32_t b = c[i + 2].cp;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  }
  return 0;
}

// Characters matched by " ?X+" at `i` for class X in {letter, number,
// other}, or 0.
size_t RunAt(const std::vector<Char>& c, size_t i) {
  size_t j = i;
  if (c[j].cp == ' ' && j + 1 < c.size()) ++j;
  const CharClass cls = c[j].cls;
  if (cls == CharClass::kSpace) return 0;
  size_t k = j;
  while (k < c.size() && c[k].cls == cls) ++k;
  return k - i;
}

}  // namespace

std::vector<absl::string_view> Gpt2PreTokenize(absl::string_view text) {
  const std::vector<Char> c = Decode(text);
  std::vector<absl::string_view> pieces;
  size_t i = 0;
  while (i < c.size()) {
    size_t n = ContractionAt(c, i);
    if (n == 0) n = RunAt(c, i);
    if (n == 0) {
      // A whitespace run. "\s+(?!\S)" leaves the last space of a run that is
      // followed by text, so it can lead the next word (" word"); a single
      // such space falls to the final "\s+" and stands alone.
      size_t j = i;
      while (j < c.size() && c[j].cls == CharClass::kSpace) ++j;
      n = j - i;
      if (j < c.size() && n > 1) --n;
    }
    const size_t begin = c[i].begin;
    const size_t end = c[i + n - 1].begin + c[i + n - 1].size;
    pieces.push_back(text.substr(begin, end - begin));
    i += n;
  }
  return pieces;
}

}  // namespace conveyor
