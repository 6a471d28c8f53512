#include "data/md5.h"

#include <cmath>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_format.h"

namespace conveyor {
namespace {

constexpr uint32_t kShift[64] = {7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22,
                                 5, 9,  14, 20, 5, 9,  14, 20, 5, 9,  14, 20, 5, 9,  14, 20,
                                 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23,
                                 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21};

uint32_t RotateLeft(uint32_t x, uint32_t c) { return (x << c) | (x >> (32 - c)); }

struct Md5State {
  uint32_t h[4] = {0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476};
  uint32_t k[64];
  Md5State() {
    // The RFC's table: floor(|sin(i + 1)| * 2^32).
    for (int i = 0; i < 64; ++i) {
      k[i] = uint32_t(std::floor(std::fabs(std::sin(i + 1.0)) * 4294967296.0));
    }
  }

  void Block(const unsigned char* p) {
    uint32_t m[16];
    for (int i = 0; i < 16; ++i) {
      m[i] = uint32_t(p[4 * i]) | uint32_t(p[4 * i + 1]) << 8 | uint32_t(p[4 * i + 2]) << 16 |
             uint32_t(p[4 * i + 3]) << 24;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3];
    for (uint32_t i = 0; i < 64; ++i) {
      uint32_t f, g;
      if (i < 16) {
        f = (b & c) | (~b & d);
        g = i;
      } else if (i < 32) {
        f = (d & b) | (~d & c);
        g = (5 * i + 1) % 16;
      } else if (i < 48) {
        f = b ^ c ^ d;
        g = (3 * i + 5) % 16;
      } else {
        f = c ^ (b | ~d);
        g = (7 * i) % 16;
      }
      const uint32_t next = b + RotateLeft(a + f + k[i] + m[g], kShift[i]);
      a = d;
      d = c;
      c = b;
      b = next;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
  }
};

}  // namespace

std::string Md5Hex(absl::string_view data) {
  Md5State s;
  const size_t full = data.size() / 64 * 64;
  for (size_t i = 0; i < full; i += 64) {
    s.Block(reinterpret_cast<const unsigned char*>(data.data() + i));
  }
  // Padding: 0x80, zeros, then the bit length (little-endian) in 64 bits.
  unsigned char tail[128] = {0};
  const size_t rest = data.size() - full;
  std::memcpy(tail, data.data() + full, rest);
  tail[rest] = 0x80;
  const size_t tail_len = rest < 56 ? 64 : 128;
  const uint64_t bits = uint64_t(data.size()) * 8;
  for (int i = 0; i < 8; ++i) tail[tail_len - 8 + i] = (unsigned char)(bits >> (8 * i));
  for (size_t i = 0; i < tail_len; i += 64) s.Block(tail + i);
  std::string out;
  for (uint32_t v : s.h) {
    for (int i = 0; i < 4; ++i) absl::StrAppendFormat(&out, "%02x", (v >> (8 * i)) & 0xff);
  }
  return out;
}

}  // namespace conveyor
