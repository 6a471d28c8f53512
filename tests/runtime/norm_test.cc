// The CPU LayerNorm and RMSNorm (runtime/cpu/norm.h) against float64 formulas written
// here: forward (values, mean, rstd) and the input gradient. Rows are 1000 wide, so the
// vector lanes' blocks end in a ragged tail, and there are enough rows for several pool
// tasks. The forward rows sit far from zero (mean 100, spread 0.5): a row statistic
// summed in fp32 would lose the digits the checks below demand.
#include "runtime/cpu/norm.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace conveyor::cpu {
namespace {

constexpr int64_t kRows = 37;
constexpr int64_t kWidth = 1000;
constexpr float kEps = 1e-5f;

std::vector<float> Random(int64_t n, uint32_t seed, float mean, float spread) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(mean, spread);
  std::vector<float> v(n);
  for (float& x : v) x = normal(gen);
  return v;
}

// One row's statistics in float64: the mean (0 for RMSNorm) and 1 / sqrt(var + eps).
struct Stats64 {
  double mean, rstd;
};

Stats64 RowStats64(NormKind kind, const float* x) {
  double mean = 0.0;
  if (kind == NormKind::kLayerNorm) {
    for (int64_t i = 0; i < kWidth; ++i) mean += x[i];
    mean /= kWidth;
  }
  double var = 0.0;
  for (int64_t i = 0; i < kWidth; ++i) var += (x[i] - mean) * (x[i] - mean);
  return {mean, 1.0 / std::sqrt(var / kWidth + kEps)};
}

void CheckForward(NormKind kind) {
  const std::vector<float> x = Random(kRows * kWidth, 1, 100.0f, 0.5f);
  const std::vector<float> gamma = Random(kWidth, 2, 1.0f, 0.3f);
  const std::vector<float> beta = Random(kWidth, 3, 0.0f, 0.3f);
  const bool layer = kind == NormKind::kLayerNorm;
  std::vector<float> y(kRows * kWidth), mean(kRows), rstd(kRows);
  NormForward(kind, x.data(), gamma.data(), layer ? beta.data() : nullptr, kRows, kWidth, kEps,
              y.data(), mean.data(), rstd.data());
  for (int64_t r = 0; r < kRows; ++r) {
    const float* xr = x.data() + r * kWidth;
    const Stats64 want = RowStats64(kind, xr);
    // mean and rstd are the float64 values rounded to fp32 (one ulp of slack).
    EXPECT_NEAR(mean[r], want.mean, 1.2e-7 * std::abs(want.mean)) << "row " << r;
    EXPECT_NEAR(rstd[r], want.rstd, 1.2e-7 * want.rstd) << "row " << r;
    for (int64_t i = 0; i < kWidth; ++i) {
      const double y64 =
          (xr[i] - want.mean) * want.rstd * gamma[i] + (layer ? static_cast<double>(beta[i]) : 0.0);
      // The fp32 mean carries half an ulp of 100 (3.8e-6), times rstd (~2 here for
      // LayerNorm) in xhat.
      ASSERT_NEAR(y[r * kWidth + i], y64, 2e-5 + 1e-6 * std::abs(y64))
          << "row " << r << ", column " << i;
    }
  }
}

TEST(NormTest, LayerNormForwardMatchesFloat64) { CheckForward(NormKind::kLayerNorm); }
TEST(NormTest, RmsNormForwardMatchesFloat64) { CheckForward(NormKind::kRmsNorm); }

// dx from float64 statistics of x:
//   LayerNorm: dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
//   RMSNorm:   dx = rstd * (g - xhat * mean(g * xhat)),   g = dy * gamma.
void CheckBackwardInput(NormKind kind) {
  const std::vector<float> x = Random(kRows * kWidth, 4, 3.0f, 2.0f);
  const std::vector<float> dy = Random(kRows * kWidth, 5, 0.0f, 1.0f);
  const std::vector<float> gamma = Random(kWidth, 6, 1.0f, 0.3f);
  const std::vector<float> beta(kWidth, 0.0f);
  const bool layer = kind == NormKind::kLayerNorm;
  std::vector<float> y(kRows * kWidth), mean(kRows), rstd(kRows), dx(kRows * kWidth);
  NormForward(kind, x.data(), gamma.data(), layer ? beta.data() : nullptr, kRows, kWidth, kEps,
              y.data(), mean.data(), rstd.data());
  NormBackwardInput(kind, dy.data(), x.data(), gamma.data(), mean.data(), rstd.data(), kRows,
                    kWidth, dx.data());
  for (int64_t r = 0; r < kRows; ++r) {
    const float* xr = x.data() + r * kWidth;
    const float* dyr = dy.data() + r * kWidth;
    const Stats64 s = RowStats64(kind, xr);
    double mean_g = 0.0, mean_g_xhat = 0.0;
    for (int64_t i = 0; i < kWidth; ++i) {
      const double g = static_cast<double>(dyr[i]) * gamma[i];
      mean_g += g / kWidth;
      mean_g_xhat += g * (xr[i] - s.mean) * s.rstd / kWidth;
    }
    if (!layer) mean_g = 0.0;
    for (int64_t i = 0; i < kWidth; ++i) {
      const double xhat = (xr[i] - s.mean) * s.rstd;
      const double dx64 =
          s.rstd * (static_cast<double>(dyr[i]) * gamma[i] - mean_g - xhat * mean_g_xhat);
      ASSERT_NEAR(dx[r * kWidth + i], dx64, 1e-6 + 1e-5 * std::abs(dx64))
          << "row " << r << ", column " << i;
    }
  }
}

TEST(NormTest, LayerNormInputGradientMatchesFloat64) { CheckBackwardInput(NormKind::kLayerNorm); }
TEST(NormTest, RmsNormInputGradientMatchesFloat64) { CheckBackwardInput(NormKind::kRmsNorm); }

}  // namespace
}  // namespace conveyor::cpu
