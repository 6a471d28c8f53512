#include "runtime/philox.h"

#include <cmath>

#include "runtime/philox_rounds.h"

namespace conveyor {

PhiloxBlock Philox4x32(PhiloxBlock c, std::array<uint32_t, 2> key) {
  PhiloxRounds(c.data(), key[0], key[1]);
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

float CounterRng::Uniform(uint64_t index) const { return PhiloxUniform(seed_, stream_, index); }

float CounterRng::Normal(uint64_t index) const {
  const PhiloxBlock block = Block(index);
  // u1 in (0, 1] so that log(u1) is finite.
  const double u1 = (static_cast<double>(block[0]) + 1.0) / 4294967296.0;
  const double u2 = static_cast<double>(block[1]) / 4294967296.0;
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
}

}  // namespace conveyor
