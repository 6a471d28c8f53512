#include "data/numpy_random.h"

namespace conveyor {
namespace {

constexpr int kN = 624;
constexpr int kM = 397;
constexpr uint32_t kMatrixA = 0x9908b0dfU;
constexpr uint32_t kUpperMask = 0x80000000U;
constexpr uint32_t kLowerMask = 0x7fffffffU;

// Smallest 2^k - 1 that covers `max`.
uint64_t MaskFor(uint64_t max) {
  uint64_t mask = max;
  mask |= mask >> 1;
  mask |= mask >> 2;
  mask |= mask >> 4;
  mask |= mask >> 8;
  mask |= mask >> 16;
  mask |= mask >> 32;
  return mask;
}

}  // namespace

NumpyRandomState::NumpyRandomState(uint32_t seed) {
  // Integer seeds go through MT19937's init_genrand (not init_by_array).
  state_[0] = seed;
  for (int i = 1; i < kN; ++i) {
    state_[i] = 1812433253U * (state_[i - 1] ^ (state_[i - 1] >> 30)) + uint32_t(i);
  }
  position_ = kN;
}

void NumpyRandomState::Regenerate() {
  for (int i = 0; i < kN; ++i) {
    const uint32_t y = (state_[i] & kUpperMask) | (state_[(i + 1) % kN] & kLowerMask);
    state_[i] = state_[(i + kM) % kN] ^ (y >> 1) ^ ((y & 1U) ? kMatrixA : 0U);
  }
  position_ = 0;
}

uint32_t NumpyRandomState::NextUint32() {
  if (position_ >= kN) Regenerate();
  uint32_t y = state_[position_++];
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680U;
  y ^= (y << 15) & 0xefc60000U;
  y ^= y >> 18;
  return y;
}

uint64_t NumpyRandomState::NextUint64() {
  const uint64_t high = NextUint32();
  return (high << 32) | NextUint32();
}

double NumpyRandomState::RandomSample() {
  const int32_t a = int32_t(NextUint32() >> 5);
  const int32_t b = int32_t(NextUint32() >> 6);
  return (a * 67108864.0 + b) / 9007199254740992.0;
}

uint64_t NumpyRandomState::RandomInterval(uint64_t max) {
  if (max == 0) return 0;
  const uint64_t mask = MaskFor(max);
  uint64_t value;
  if (max <= 0xffffffffULL) {
    while ((value = (NextUint32() & mask)) > max) {
    }
  } else {
    while ((value = (NextUint64() & mask)) > max) {
    }
  }
  return value;
}

int64_t NumpyRandomState::RandInt(int64_t low, int64_t high) {
  const uint64_t range = uint64_t(high) - uint64_t(low) - 1;
  if (range == 0) return low;
  // Ranges that fit 32 bits draw 32-bit words; a full 32-bit range takes the
  // word as is. Wider ranges draw 64-bit words.
  if (range == 0xffffffffULL) return low + int64_t(NextUint32());
  return low + int64_t(RandomInterval(range));
}

std::vector<int64_t> NumpyRandomState::Permutation(int64_t n) {
  std::vector<int64_t> values(n);
  for (int64_t i = 0; i < n; ++i) values[i] = i;
  Shuffle(absl::MakeSpan(values));
  return values;
}

}  // namespace conveyor
