// RoPE's scaled frequencies (runtime/rope_scaling.h) against float64 references written
// here from the published definitions: Llama 3.1's rule (Meta's release; transformers'
// _compute_llama3_parameters and Megatron's RotaryEmbedding._apply_scaling describe it)
// and YaRN's (Peng et al. 2023; transformers' _compute_yarn_parameters and Megatron's
// YarnRotaryEmbedding), with the concentration factor on the cos/sin table.
#include "runtime/rope_scaling.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/op_params.h"

namespace conveyor {
namespace {

const double kPi = std::acos(-1.0);

std::vector<double> Unscaled(int64_t dims, double base) {
  std::vector<double> f;
  for (int64_t i = 0; i < dims; i += 2) f.push_back(1.0 / std::pow(base, double(i) / dims));
  return f;
}

// Llama 3.1: low frequencies (long wavelengths) divided by the factor, high ones kept,
// the band between blended by how many wavelengths fit the original context.
std::vector<double> Llama3Reference(int64_t dims, double base, double factor, double low,
                                    double high, double context) {
  std::vector<double> out;
  for (const double f : Unscaled(dims, base)) {
    const double wavelength = 2 * kPi / f;
    if (wavelength < context / high) {
      out.push_back(f);
    } else if (wavelength > context / low) {
      out.push_back(f / factor);
    } else {
      const double smooth = (context / wavelength - low) / (high - low);
      out.push_back((1 - smooth) * f / factor + smooth * f);
    }
  }
  return out;
}

// YaRN: dimension d's pair turns L f_d / (2 pi) times over the original context L; the
// pairs turning more than beta_fast times keep f, fewer than beta_slow take f / s, and
// a linear ramp over the dimension index joins them.
std::vector<double> YarnReference(int64_t dims, double base, double s, double beta_fast,
                                  double beta_slow, double context, bool round) {
  auto dim_of = [&](double turns) {
    return dims * std::log(context / (turns * 2 * kPi)) / (2 * std::log(base));
  };
  double low = dim_of(beta_fast), high = dim_of(beta_slow);
  if (round) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, double(dims - 1));
  if (low == high) high += 0.001;
  std::vector<double> out;
  const std::vector<double> f = Unscaled(dims, base);
  for (size_t i = 0; i < f.size(); ++i) {
    const double keep = 1 - std::clamp((double(i) - low) / (high - low), 0.0, 1.0);
    out.push_back(f[i] / s * (1 - keep) + f[i] * keep);
  }
  return out;
}

void ExpectClose(const std::vector<float>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 2e-6 * want[i]) << "pair " << i;
  }
}

RopeScaling Llama3(double factor, double low, double high, int64_t context) {
  RopeScaling s;
  s.kind = RopeScalingKind::kLlama3;
  s.factor = factor;
  s.low_freq_factor = low;
  s.high_freq_factor = high;
  s.original_max_positions = context;
  return s;
}

RopeScaling Yarn(double factor, int64_t context, double mscale, double mscale_all_dim) {
  RopeScaling s;
  s.kind = RopeScalingKind::kYarn;
  s.factor = factor;
  s.original_max_positions = context;
  s.mscale = mscale;
  s.mscale_all_dim = mscale_all_dim;
  return s;
}

TEST(RopeScalingTest, UnscaledIsMegatronsInverseFrequency) {
  ExpectClose(RopeFrequencies(64, 10000.0f, {}), Unscaled(64, 10000.0));
  EXPECT_EQ(RopeConcentration({}), 1.0f);
}

// Llama 3.1 8B (factor 8) and Llama 3.2 (factor 32): head_dim 128, theta 500000, low 1,
// high 4, original context 8192. All three bands occur.
TEST(RopeScalingTest, Llama3MatchesPublishedRule) {
  for (const double factor : {8.0, 32.0}) {
    const std::vector<float> got = RopeFrequencies(128, 500000.0f, Llama3(factor, 1, 4, 8192));
    const std::vector<double> want = Llama3Reference(128, 500000.0, factor, 1, 4, 8192);
    ExpectClose(got, want);
    const std::vector<double> plain = Unscaled(128, 500000.0);
    EXPECT_EQ(want.front(), plain.front());                  // high frequency: kept
    EXPECT_NEAR(want.back(), plain.back() / factor, 1e-18);  // low frequency: divided
    int blended = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      blended += want[i] != plain[i] && want[i] != plain[i] / factor;
    }
    EXPECT_GT(blended, 0);
  }
  ExpectClose(RopeFrequencies(64, 10000.0f, Llama3(4, 2, 8, 2048)),
              Llama3Reference(64, 10000.0, 4, 2, 8, 2048));
  EXPECT_EQ(RopeConcentration(Llama3(8, 1, 4, 8192)), 1.0f);
}

// DeepSeek-V3's YaRN (rope dims 64, theta 10000, s 40, beta 32 / 1, context 4096) and a
// Qwen-style one (s 4, context 32768, head_dim 128), rounded and unrounded.
TEST(RopeScalingTest, YarnMatchesPublishedRule) {
  struct Case {
    int64_t dims;
    double base, s;
    int64_t context;
    bool round;
  };
  for (const Case& c : {Case{64, 10000, 40, 4096, true}, Case{128, 1000000, 4, 32768, true},
                        Case{64, 10000, 40, 4096, false}}) {
    RopeScaling scaling = Yarn(c.s, c.context, 1.0, 0.0);
    scaling.round_to_int = c.round;
    ExpectClose(RopeFrequencies(c.dims, static_cast<float>(c.base), scaling),
                YarnReference(c.dims, c.base, c.s, 32, 1, static_cast<double>(c.context), c.round));
  }
}

// The concentration factor (0.1 mscale ln s + 1) / (0.1 mscale_all_dim ln s + 1), 1 for
// s <= 1, multiplies every cos and sin of the table.
TEST(RopeScalingTest, YarnConcentrationScalesTheTable) {
  EXPECT_NEAR(RopeConcentration(Yarn(40, 4096, 1.0, 0.0)), 0.1 * std::log(40.0) + 1, 1e-6);
  EXPECT_NEAR(RopeConcentration(Yarn(40, 4096, 1.0, 1.0)), 1.0, 1e-7);  // DeepSeek-V3
  EXPECT_NEAR(RopeConcentration(Yarn(40, 4096, 0.707, 1.0)),
              (0.0707 * std::log(40.0) + 1) / (0.1 * std::log(40.0) + 1), 1e-6);
  EXPECT_EQ(RopeConcentration(Yarn(1, 4096, 1.0, 0.0)), 1.0f);
  const RopeScaling scaling = Yarn(8, 16, 1.0, 0.0);
  const RopeTable table(20, 16, 10000.0f, scaling);
  const std::vector<double> f = YarnReference(16, 10000.0, 8, 32, 1, 16, true);
  const double m = 0.1 * std::log(8.0) + 1;
  for (int64_t p = 0; p < 20; ++p) {
    for (int64_t i = 0; i < 8; ++i) {
      EXPECT_NEAR(table.cos[p * 8 + i], m * std::cos(p * f[i]), 1e-5) << p << " " << i;
      EXPECT_NEAR(table.sin[p * 8 + i], m * std::sin(p * f[i]), 1e-5) << p << " " << i;
    }
  }
}

}  // namespace
}  // namespace conveyor
