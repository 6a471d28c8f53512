// The AVX-512 bf16 <-> fp32 array conversions against a reference written here: a bf16
// value is the high 16 bits of an fp32 one, and rounding picks the nearer of the two bf16
// values around x (compared in float64), the one with an even last bit on a tie (IEEE
// 754's round to nearest even), keeping a NaN a NaN. Every bf16 bit pattern, every tail
// length, ties, subnormals, the largest values and infinities. Skipped (and passing) on
// a CPU without AVX-512 BF16.
#include "runtime/cpu/bf16_convert.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "tests/runtime/skip_without_bf16.h"

namespace conveyor::cpu {
namespace {

float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}
uint32_t BitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

// The bf16 bits nearest x, ties to even (x finite or infinite).
uint16_t NearestBf16(float x) {
  const uint32_t u = BitsOf(x);
  const uint16_t down = static_cast<uint16_t>(u >> 16);  // toward zero
  if ((u & 0xffffu) == 0) return down;
  const uint16_t up = static_cast<uint16_t>(down + 1);  // away from zero (to inf at the top)
  const double to_down = std::abs(double{x} - double{FromBits(uint32_t{down} << 16)});
  // Past the largest bf16 value "up" is 2^128 as if the exponent went on (IEEE 754
  // rounds there, then overflows to infinity).
  const double up_value = (up & 0x7fffu) == 0x7f80u ? std::copysign(std::ldexp(1.0, 128), x)
                                                     : double{FromBits(uint32_t{up} << 16)};
  const double to_up = std::abs(double{x} - up_value);
  if (to_down != to_up) return to_down < to_up ? down : up;
  return down % 2 == 0 ? down : up;
}

TEST(Bf16ConvertTest, WidenGivesEveryBf16ValueItsFp32Bits) {
  SKIP_WITHOUT_BF16();
  std::vector<BFloat16> in(1 << 16);
  for (uint32_t i = 0; i < in.size(); ++i) in[i].bits = static_cast<uint16_t>(i);
  std::vector<float> out(in.size() + 1, 7.0f);
  WidenBf16(in.data(), static_cast<int64_t>(in.size()), out.data());
  for (uint32_t i = 0; i < in.size(); ++i) ASSERT_EQ(BitsOf(out[i]), i << 16) << i;
  EXPECT_EQ(out.back(), 7.0f);  // nothing written past n
}

TEST(Bf16ConvertTest, RoundIsToNearestEvenAtEveryLength) {
  SKIP_WITHOUT_BF16();
  std::mt19937 rng(3);
  std::vector<float> in;
  for (int i = 0; i < 20000; ++i) in.push_back(FromBits(static_cast<uint32_t>(rng())));
  const float specials[] = {0.0f,
                            -0.0f,
                            1.0f + std::ldexp(1.0f, -8),  // a tie, rounds down to even
                            1.0f + 3 * std::ldexp(1.0f, -8),  // a tie, rounds up to even
                            std::numeric_limits<float>::denorm_min(),
                            -std::numeric_limits<float>::denorm_min() * 12345,
                            std::numeric_limits<float>::min(),
                            std::numeric_limits<float>::max(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::infinity()};
  for (const float x : specials) in.push_back(x);
  for (const int64_t n : {int64_t{0}, int64_t{1}, int64_t{15}, int64_t{17},
                          static_cast<int64_t>(in.size())}) {
    std::vector<BFloat16> out(n + 1, BFloat16{0x1234});
    RoundToBf16(in.data(), n, out.data());
    for (int64_t i = 0; i < n; ++i) {
      if (std::isnan(in[i])) {
        ASSERT_TRUE(std::isnan(FromBits(uint32_t{out[i].bits} << 16))) << i;
      } else {
        ASSERT_EQ(out[i].bits, NearestBf16(in[i])) << in[i];
      }
    }
    EXPECT_EQ(out[n].bits, 0x1234) << "nothing written past n = " << n;
  }
}

}  // namespace
}  // namespace conveyor::cpu
