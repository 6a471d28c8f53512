#include "runtime/philox.h"

#include <cmath>

#include "gtest/gtest.h"

namespace conveyor {
namespace {

// Known-answer vectors of Random123's philox4x32_10 (kat_vectors).
TEST(PhiloxTest, MatchesRandom123KnownAnswers) {
  EXPECT_EQ(Philox4x32({0, 0, 0, 0}, {0, 0}),
            (PhiloxBlock{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  EXPECT_EQ(
      Philox4x32({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, {0xffffffffu, 0xffffffffu}),
      (PhiloxBlock{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  EXPECT_EQ(
      Philox4x32({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}, {0xa4093822u, 0x299f31d0u}),
      (PhiloxBlock{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

TEST(CounterRngTest, ValueDependsOnlyOnSeedStreamAndIndex) {
  const CounterRng a(42, StreamId("layers.0.mlp.fc1.weight"));
  const CounterRng b(42, StreamId("layers.0.mlp.fc1.weight"));
  const CounterRng other(42, StreamId("layers.0.mlp.fc2.weight"));
  EXPECT_EQ(a.Normal(123456), b.Normal(123456));
  EXPECT_NE(a.Normal(123456), other.Normal(123456));
  EXPECT_NE(a.Normal(1), a.Normal(2));
}

TEST(CounterRngTest, NormalAndUniformHaveTheirMoments) {
  const CounterRng rng(7, 1);
  constexpr int kN = 200000;
  double sum = 0, sum_sq = 0, usum = 0;
  float umin = 1, umax = 0;
  for (int i = 0; i < kN; ++i) {
    const double x = rng.Normal(i);
    sum += x;
    sum_sq += x * x;
    const float u = rng.Uniform(i);
    usum += u;
    umin = std::min(umin, u);
    umax = std::max(umax, u);
  }
  // Standard errors at 200k draws: mean 0.0022, variance 0.0032, uniform mean 0.0006.
  EXPECT_NEAR(sum / kN, 0.0, 0.01);
  EXPECT_NEAR(sum_sq / kN, 1.0, 0.015);
  EXPECT_NEAR(usum / kN, 0.5, 0.003);
  EXPECT_GE(umin, 0.0f);
  EXPECT_LT(umax, 1.0f);
}

}  // namespace
}  // namespace conveyor
