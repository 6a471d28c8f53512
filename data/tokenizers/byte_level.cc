#include "data/tokenizers/byte_level.h"

#include <array>

#include "data/tokenizers/utf8_text.h"

namespace conveyor {
namespace {

struct ByteLevelMap {
  ByteLevelMap() {
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable =
          (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const uint32_t cp = printable ? uint32_t(b) : next++;
      AppendCodePoint(cp, &chars[b]);
      byte_of[cp] = int16_t(b);
    }
  }
  std::array<std::string, 256> chars;
  std::array<int16_t, 324> byte_of{};  // code point -> byte; stand-ins end below U+0144
};

const ByteLevelMap& Map() {
  static const ByteLevelMap* const map = new ByteLevelMap();
  return *map;
}

}  // namespace

void AppendByteLevelChars(absl::string_view bytes, std::string* out) {
  const ByteLevelMap& map = Map();
  for (char c : bytes) *out += map.chars[static_cast<unsigned char>(c)];
}

bool ByteLevelBytes(absl::string_view token, std::string* bytes) {
  const ByteLevelMap& map = Map();
  bytes->clear();
  for (size_t i = 0; i < token.size();) {
    const auto b0 = static_cast<unsigned char>(token[i]);
    uint32_t cp;
    if (b0 < 0x80) {
      cp = b0;
      i += 1;
    } else if ((b0 >> 5) == 0x6 && i + 1 < token.size()) {
      cp = ((b0 & 0x1F) << 6) | (static_cast<unsigned char>(token[i + 1]) & 0x3F);
      i += 2;
    } else {
      return false;  // stand-ins are all below U+0800
    }
    if (cp >= map.byte_of.size()) return false;
    // Byte 0 is not printable, so byte_of == 0 means "no byte" except for U+0100.
    if (map.byte_of[cp] == 0 && cp != 0x100) return false;
    bytes->push_back(char(map.byte_of[cp]));
  }
  return true;
}

}  // namespace conveyor
