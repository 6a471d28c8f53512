#include "runtime/philox.h"

#include <cmath>

namespace conveyor {
namespace {

constexpr uint32_t kMultiplier0 = 0xD2511F53u;
constexpr uint32_t kMultiplier1 = 0xCD9E8D57u;
constexpr uint32_t kWeyl0 = 0x9E3779B9u;  // golden ratio
constexpr uint32_t kWeyl1 = 0xBB67AE85u;  // sqrt(3) - 1

inline void MulHiLo(uint32_t a, uint32_t b, uint32_t* hi, uint32_t* lo) {
  const uint64_t product = static_cast<uint64_t>(a) * b;
  *hi = static_cast<uint32_t>(product >> 32);
  *lo = static_cast<uint32_t>(product);
}

}  // namespace

PhiloxBlock Philox4x32(PhiloxBlock c, std::array<uint32_t, 2> key) {
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    MulHiLo(kMultiplier0, c[0], &hi0, &lo0);
    MulHiLo(kMultiplier1, c[2], &hi1, &lo1);
    c = {hi1 ^ c[1] ^ key[0], lo1, hi0 ^ c[3] ^ key[1], lo0};
    key[0] += kWeyl0;
    key[1] += kWeyl1;
  }
  return c;
}

uint64_t StreamId(absl::string_view name) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char ch : name) {
    hash ^= ch;
    hash *= 0x100000001b3ull;
  }
  return hash;
}

uint64_t MixStream(uint64_t stream, uint64_t value) {
  uint64_t z = stream ^ (value + 0x9e3779b97f4a7c15ull + (stream << 6) + (stream >> 2));
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

PhiloxBlock CounterRng::Block(uint64_t index) const {
  return Philox4x32({static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32),
                     static_cast<uint32_t>(stream_), static_cast<uint32_t>(stream_ >> 32)},
                    {static_cast<uint32_t>(seed_), static_cast<uint32_t>(seed_ >> 32)});
}

float CounterRng::Uniform(uint64_t index) const {
  return static_cast<float>(Block(index)[0] >> 8) * (1.0f / 16777216.0f);
}

float CounterRng::Normal(uint64_t index) const {
  const PhiloxBlock block = Block(index);
  // u1 in (0, 1] so that log(u1) is finite.
  const double u1 = (static_cast<double>(block[0]) + 1.0) / 4294967296.0;
  const double u2 = static_cast<double>(block[1]) / 4294967296.0;
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
}

}  // namespace conveyor
