// CPU AdamW reference against hand-computed values and the formula in double.
#include "runtime/cpu/adamw.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace conveyor {
namespace {

// The textbook formula (see adamw.h), in double, one element, independent of the
// fp32 operation order the implementation uses.
struct RefState {
  double param;
  double m = 0.0;
  double v = 0.0;
};

void RefAdamWStep(const AdamWHyperParams& hp, double grad, RefState* s) {
  const double b1 = hp.beta1, b2 = hp.beta2;
  s->m = b1 * s->m + (1.0 - b1) * grad;
  s->v = b2 * s->v + (1.0 - b2) * grad * grad;
  const double m_hat = s->m / (1.0 - std::pow(b1, static_cast<double>(hp.step)));
  const double v_hat = s->v / (1.0 - std::pow(b2, static_cast<double>(hp.step)));
  s->param -= static_cast<double>(hp.lr) *
              (hp.weight_decay * s->param + m_hat / (std::sqrt(v_hat) + hp.eps));
}

TEST(AdamWTest, TwoStepsMatchHandComputedValues) {
  AdamWHyperParams hp{/*lr=*/0.1f,           /*beta1=*/0.9f, /*beta2=*/0.999f, /*eps=*/1e-8f,
                      /*weight_decay=*/0.1f, /*step=*/1};
  float param = 1.0f, m = 0.0f, v = 0.0f;
  RefState ref{1.0};

  // Step 1, g = 0.5 (by hand): m = 0.1 * 0.5 = 0.05, v = 0.001 * 0.25 = 0.00025,
  // m_hat = 0.5, v_hat = 0.25, so param = 1 - 0.1 * (0.1 * 1 + 0.5 / 0.5) = 0.89.
  float grad = 0.5f;
  AdamWStep(hp, &grad, &param, &m, &v, 1);
  RefAdamWStep(hp, grad, &ref);
  // The hand values use the decimal betas; the struct holds fp32 betas (as Megatron's
  // fused Adam does), and 1 - 0.999f = 0.000999987 is 1.3e-5 relatively off 0.001, so
  // the literals get a 2e-5 relative tolerance. The double reference uses the fp32
  // betas and is held to 1e-6.
  EXPECT_NEAR(m, 0.05, 2e-5 * 0.05);
  EXPECT_NEAR(v, 0.00025, 2e-5 * 0.00025);
  EXPECT_NEAR(param, 0.89, 1e-6);
  EXPECT_NEAR(param, ref.param, 1e-6);
  EXPECT_NEAR(m, ref.m, 1e-6 * ref.m);
  EXPECT_NEAR(v, ref.v, 1e-6 * ref.v);

  // Step 2, g = -0.25 (by hand): m = 0.045 - 0.025 = 0.02,
  // v = 0.999 * 0.00025 + 0.001 * 0.0625 = 0.00031225,
  // m_hat = 0.02 / 0.19 = 0.1052632, v_hat = 0.00031225 / 0.001999 = 0.1562031,
  // param = 0.89 - 0.1 * (0.089 + 0.1052632 / 0.3952254) = 0.8544663.
  hp.step = 2;
  grad = -0.25f;
  AdamWStep(hp, &grad, &param, &m, &v, 1);
  RefAdamWStep(hp, grad, &ref);
  EXPECT_NEAR(m, 0.02, 2e-5 * 0.02);
  EXPECT_NEAR(v, 0.00031225, 2e-5 * 0.00031225);
  EXPECT_NEAR(param, 0.8544663, 1e-6);
  EXPECT_NEAR(param, ref.param, 1e-6);
  EXPECT_NEAR(m, ref.m, 1e-6 * ref.m);
  EXPECT_NEAR(v, ref.v, 1e-6 * ref.v);
}

TEST(AdamWTest, ManyElementsManyStepsMatchDoubleReference) {
  const int64_t n = 257;
  std::vector<float> param(n), m(n, 0.0f), v(n, 0.0f), grad(n);
  std::vector<RefState> ref(n);
  for (int64_t i = 0; i < n; ++i) {
    param[i] = std::sin(0.37 * i) * 2.0;  // fp32 value, mirrored exactly in double
    ref[i].param = param[i];
  }
  AdamWHyperParams hp{3e-4f, 0.9f, 0.95f, 1e-8f, 0.01f, 0};
  for (int64_t step = 1; step <= 5; ++step) {
    hp.step = step;
    for (int64_t i = 0; i < n; ++i) {
      grad[i] = static_cast<float>(std::cos(0.11 * i * step) * std::pow(10.0, i % 7 - 3));
    }
    AdamWStep(hp, grad.data(), param.data(), m.data(), v.data(), n);
    for (int64_t i = 0; i < n; ++i) RefAdamWStep(hp, grad[i], &ref[i]);
  }
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_NEAR(param[i], ref[i].param, 1e-6 * std::max(1.0, std::fabs(ref[i].param)))
        << "element " << i;
  }
}

TEST(AdamWTest, ZeroGradWithWeightDecayShrinksParams) {
  AdamWHyperParams hp{0.01f, 0.9f, 0.999f, 1e-8f, 0.1f, 1};
  std::vector<float> param = {2.0f, -3.0f, 0.5f};
  const std::vector<float> before = param;
  std::vector<float> grad(3, 0.0f), m(3, 0.0f), v(3, 0.0f);
  AdamWStep(hp, grad.data(), param.data(), m.data(), v.data(), 3);
  for (int i = 0; i < 3; ++i) {
    // m_hat = 0 so the Adam term is 0 / (0 + eps) = 0: only the decay acts.
    EXPECT_FLOAT_EQ(param[i], before[i] * (1.0f - 0.01f * 0.1f));
    EXPECT_LT(std::fabs(param[i]), std::fabs(before[i]));
    EXPECT_EQ(m[i], 0.0f);
    EXPECT_EQ(v[i], 0.0f);
  }
}

TEST(AdamWTest, BiasCorrectionMakesConstantGradStepsOfSizeLr) {
  // With constant g, m_hat = g and v_hat = g^2 exactly at every step, so the update is
  // lr * g / (|g| + eps) ~= lr * sign(g), whatever |g| is (wd = 0). Without bias
  // correction step 1 would move by only lr * 0.1 / sqrt(0.001) ~= 3.16 lr.
  const float lr = 1e-3f;
  for (float g : {1e-3f, 0.5f, 1.0f, 1e3f, -2.0f}) {
    float param = 1.0f, m = 0.0f, v = 0.0f;
    for (int64_t step = 1; step <= 10; ++step) {
      AdamWHyperParams hp{lr, 0.9f, 0.999f, 1e-8f, 0.0f, step};
      const float before = param;
      AdamWStep(hp, &g, &param, &m, &v, 1);
      const float expected_delta = -lr * g / (std::fabs(g) + 1e-8f);
      EXPECT_NEAR(param - before, expected_delta, 1e-6f * lr + 1e-7f)
          << "g=" << g << " step=" << step;
    }
  }
}

TEST(AdamWTest, EmptyArrayIsANoOp) {
  AdamWHyperParams hp{0.1f, 0.9f, 0.999f, 1e-8f, 0.1f, 1};
  AdamWStep(hp, nullptr, nullptr, nullptr, nullptr, 0);
}

// grad_scale folds Megatron's clipping into the step: the result is the step on the
// gradient scaled first, float(g * scale) with the product in double, bit for bit.
TEST(AdamWTest, GradScaleIsTheStepOnTheGradientScaledFirst) {
  const double scale = 1.0 / 3.7;
  std::vector<float> grad(37), scaled(37);
  for (int i = 0; i < 37; ++i) {
    grad[i] = 0.37f * static_cast<float>(i - 18) + 1e-3f;
    scaled[i] = static_cast<float>(static_cast<double>(grad[i]) * scale);
  }
  std::vector<float> p1(37, 0.5f), m1(37, 0.0f), v1(37, 0.0f);
  std::vector<float> p2 = p1, m2 = m1, v2 = v1;
  AdamWHyperParams hp{3e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 1};
  AdamWStep(hp, scaled.data(), p2.data(), m2.data(), v2.data(), 37);
  hp.grad_scale = scale;
  AdamWStep(hp, grad.data(), p1.data(), m1.data(), v1.data(), 37);
  for (int i = 0; i < 37; ++i) {
    EXPECT_EQ(p1[i], p2[i]) << i;
    EXPECT_EQ(m1[i], m2[i]) << i;
    EXPECT_EQ(v1[i], v2[i]) << i;
  }
}

}  // namespace
}  // namespace conveyor
