// The CPU GELU against the tanh form computed in float64 (Megatron's and GPT-2's GELU):
// values to a few float ulps everywhere, including the negative range where evaluating
// 0.5 x (1 + tanh(u)) in float loses every digit, and the derivative against central
// differences of the float64 function.
#include "runtime/cpu/activation.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace conveyor::cpu {
namespace {

// GELU in float64: the tanh form literally where 1 + tanh(u) keeps digits in a double,
// in the negative tail through 1 + tanh(u) = 2 / (1 + exp(-2u)).
double GeluTanhForm(double x) {
  const double u = std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
  if (u > -10) return 0.5 * x * (1.0 + std::tanh(u));
  return x / (1.0 + std::exp(-2.0 * u));
}

std::vector<float> Inputs() {
  std::vector<float> x;
  for (int i = -4000; i <= 4000; ++i) x.push_back(static_cast<float>(i) / 400.0f);  // [-10, 10]
  return x;
}

TEST(GeluTest, ValuesMatchTheTanhFormInFloat64) {
  const std::vector<float> x = Inputs();
  std::vector<float> y(x.size());
  GeluForward(x.data(), static_cast<int64_t>(x.size()), y.data());
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = GeluTanhForm(x[i]);
    // A float u (relative error ~1e-7) moves exp(-2u), and so y in the negative tail, by
    // 2|u| times that: the tolerance follows the function's conditioning there.
    const double u = std::fabs(std::sqrt(2.0 / M_PI) * (x[i] + 0.044715 * x[i] * x[i] * x[i]));
    EXPECT_NEAR(y[i], want, (4e-6 + 2.4e-7 * u) * std::fabs(want)) << "x = " << x[i];
  }
}

TEST(GeluTest, DerivativeMatchesCentralDifferences) {
  const std::vector<float> x = Inputs();
  const std::vector<float> ones(x.size(), 1.0f);
  std::vector<float> dx(x.size());
  GeluBackward(x.data(), ones.data(), static_cast<int64_t>(x.size()), dx.data());
  for (size_t i = 0; i < x.size(); ++i) {
    const double h = 1e-5;
    const double want = (GeluTanhForm(x[i] + h) - GeluTanhForm(x[i] - h)) / (2 * h);
    EXPECT_NEAR(dx[i], want, 1e-5 * std::fabs(want) + 1e-6) << "x = " << x[i];
  }
}

// Squared ReLU (Megatron's squared_relu: torch.pow(F.relu(x), 2)) in float64, and its
// derivative against central differences of that function (h small enough not to
// straddle 0 except at the kink, which the inputs skip).
double SquaredRelu(double x) { return x > 0 ? x * x : 0.0; }

TEST(SquaredReluTest, ValuesAndDerivativeMatchFloat64) {
  std::vector<float> x;
  for (int i = -1000; i <= 1000; ++i) {
    if (i != 0) x.push_back(static_cast<float>(i) / 97.0f);
  }
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<float> y(x.size()), dy(x.size()), dx(x.size());
  for (size_t i = 0; i < x.size(); ++i) dy[i] = 0.5f + static_cast<float>(i % 5);
  SquaredReluForward(x.data(), n, y.data());
  SquaredReluBackward(x.data(), dy.data(), n, dx.data());
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_NEAR(y[i], SquaredRelu(x[i]), 1.2e-7 * SquaredRelu(x[i])) << "x = " << x[i];
    const double h = 1e-4;
    const double slope = (SquaredRelu(x[i] + h) - SquaredRelu(x[i] - h)) / (2 * h);
    EXPECT_NEAR(dx[i], dy[i] * slope, 1e-5 * std::fabs(dy[i] * slope) + 1e-7) << "x = " << x[i];
  }
  // At the kink: relu's derivative is 0 at 0 (torch's), so the gradient is 0.
  const float zero = 0.0f, one = 1.0f;
  float out = 1.0f;
  SquaredReluBackward(&zero, &one, 1, &out);
  EXPECT_EQ(out, 0.0f);
}

}  // namespace
}  // namespace conveyor::cpu
