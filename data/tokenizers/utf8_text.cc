#include "data/tokenizers/utf8_text.h"

#include "absl/strings/str_cat.h"

namespace conveyor {
namespace {

// Length of the well-formed sequence at bytes[i], or 0 when ill-formed; on 0,
// `*maximal` is how many bytes form the maximal ill-formed prefix (at least 1).
// Table 3-7 of the Unicode standard: the allowed second-byte range depends on
// the lead byte, which rules out overlongs and surrogates.
size_t WellFormedLength(absl::string_view s, size_t i, size_t* maximal) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char lead = b(i);
  *maximal = 1;
  if (lead < 0x80) return 1;
  size_t need;
  unsigned char lo = 0x80, hi = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    need = 1;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    need = 2;
    if (lead == 0xE0) lo = 0xA0;
    if (lead == 0xED) hi = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    need = 3;
    if (lead == 0xF0) lo = 0x90;
    if (lead == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  for (size_t k = 1; k <= need; ++k) {
    if (i + k >= s.size()) return 0;
    const unsigned char c = b(i + k);
    const bool ok = k == 1 ? (c >= lo && c <= hi) : (c >= 0x80 && c <= 0xBF);
    if (!ok) return 0;
    *maximal = k + 1;
  }
  return need + 1;
}

}  // namespace

int Utf8SequenceLength(absl::string_view text) {
  size_t maximal;
  return text.empty() ? 0 : static_cast<int>(WellFormedLength(text, 0, &maximal));
}

size_t FindInvalidUtf8(absl::string_view text) {
  size_t i = 0, maximal = 0;
  while (i < text.size()) {
    const size_t n = WellFormedLength(text, i, &maximal);
    if (n == 0) return i;
    i += n;
  }
  return absl::string_view::npos;
}

absl::Status CheckUtf8(absl::string_view text) {
  const size_t i = FindInvalidUtf8(text);
  if (i == absl::string_view::npos) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("text is not valid UTF-8 (ill-formed byte 0x",
                   absl::Hex(static_cast<unsigned char>(text[i]), absl::kZeroPad2),
                   " at byte offset ", i, "); convert it to UTF-8 first"));
}

size_t Utf8CharLength(absl::string_view text, size_t i) {
  size_t maximal;
  const size_t n = WellFormedLength(text, i, &maximal);
  return n == 0 ? 1 : n;
}

void AppendCodePoint(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(char(cp));
  } else if (cp < 0x800) {
    out->push_back(char(0xC0 | (cp >> 6)));
    out->push_back(char(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(char(0xE0 | (cp >> 12)));
    out->push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(char(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(char(0xF0 | (cp >> 18)));
    out->push_back(char(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(char(0x80 | (cp & 0x3F)));
  }
}

std::string Utf8Lossy(absl::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t i = 0, maximal = 0;
  while (i < bytes.size()) {
    const size_t n = WellFormedLength(bytes, i, &maximal);
    if (n == 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD
      i += maximal;
    } else {
      out.append(bytes.data() + i, n);
      i += n;
    }
  }
  return out;
}

}  // namespace conveyor
