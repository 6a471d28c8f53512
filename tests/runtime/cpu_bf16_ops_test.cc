// --bf16's GEMMs on a CPU with AVX-512 BF16 (CpuBf16Ops) against float64: a bf16 output
// is the fp32 sum of exact products rounded once, weight gradients accumulate into their
// fp32 tensors unrounded, and fp32 operands are not rounded to bf16. Skipped (and passing)
// on a CPU without AVX-512 BF16.
//
// Bounds (runtime/cpu/bf16_gemm.h): the fp32 sum errs by at most gamma(d) * sum |a b|
// with d the additions on its longest path (k, one per block of k, alpha and beta); one
// rounding to bf16 adds at most 2^-8 of the value (8 significant bits, to nearest).
#include "runtime/cpu/cpu_bf16_ops.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "runtime/bf16_emulation_ops.h"
#include "runtime/cpu/bf16_gemm.h"
#include "runtime/cpu/cpu_ops.h"
#include "runtime/philox.h"
#include "tests/runtime/skip_without_bf16.h"

namespace conveyor {
namespace {

constexpr double kBf16Rounding = 1.0 / 256;  // 2^-8

double Gamma(int64_t k) {
  const int64_t d = k + (k + cpu::kBf16GemmBlockK - 1) / cpu::kBf16GemmBlockK + 2;
  const double u = std::ldexp(1.0, -24);
  return d * u / (1 - d * u);
}

// A [rows, cols] tensor of `dtype` holding normal values (rounded when bf16), and the
// values it holds.
Tensor Random(int64_t rows, int64_t cols, DType dtype, std::mt19937* rng,
              std::vector<double>* values) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Tensor t = Tensor::Zeros({rows, cols}, MemoryCategory::kOther, dtype);
  values->resize(rows * cols);
  for (int64_t i = 0; i < rows * cols; ++i) {
    const float x = normal(*rng);
    if (dtype == DType::kFloat32) {
      t.data()[i] = x;
      (*values)[i] = x;
    } else {
      static_cast<BFloat16*>(t.raw())[i] = ToBFloat16(x);
      (*values)[i] = ToFloat(ToBFloat16(x));
    }
  }
  return t;
}

double At(const Tensor& t, int64_t i) {
  return t.dtype() == DType::kFloat32 ? t.data()[i]
                                      : ToFloat(static_cast<const BFloat16*>(t.raw())[i]);
}

// c = x w^T + beta c for x [m, k] and w [n, k] of `operands`, c [m, n] of `out`, checked
// against float64 within the fp32 sum's bound, plus one bf16 rounding for a bf16 c.
void ExpectForwardGemm(DType operands, DType out, float beta) {
  const int64_t m = 37, n = 75, k = 300;
  std::mt19937 rng(11);
  std::vector<double> x, w, c0;
  const Tensor xt = Random(m, k, operands, &rng, &x), wt = Random(n, k, operands, &rng, &w);
  Tensor c = Random(m, n, out, &rng, &c0);
  CpuBf16Ops::Get().Gemm(false, true, m, n, k, 1.0f, xt, wt, beta, &c);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = beta * c0[i * n + j], magnitude = std::abs(sum);
      for (int64_t kk = 0; kk < k; ++kk) {
        sum += x[i * k + kk] * w[j * k + kk];
        magnitude += std::abs(x[i * k + kk] * w[j * k + kk]);
      }
      const double fp32_bound = Gamma(k) * magnitude;
      const double bound = out == DType::kFloat32
                               ? fp32_bound
                               : fp32_bound + kBf16Rounding * (std::abs(sum) + fp32_bound);
      ASSERT_NEAR(At(c, i * n + j), sum, bound) << "c[" << i << ", " << j << "]";
    }
  }
}

TEST(CpuBf16OpsTest, Bf16OutputIsTheFp32SumRoundedOnce) {
  SKIP_WITHOUT_BF16();
  ExpectForwardGemm(DType::kBFloat16, DType::kBFloat16, 0.0f);
  ExpectForwardGemm(DType::kBFloat16, DType::kBFloat16, 1.0f);
}

TEST(CpuBf16OpsTest, Fp32OutputKeepsTheFp32Sum) {
  SKIP_WITHOUT_BF16();
  ExpectForwardGemm(DType::kBFloat16, DType::kFloat32, 1.0f);
}

// fp32 operands are multiplied as they are (the emulation's fp32 GEMM): rounding them to
// bf16 would err by about 2^-8 of each product, far outside the fp32 bound.
TEST(CpuBf16OpsTest, Fp32OperandsAreNotRounded) {
  SKIP_WITHOUT_BF16();
  ExpectForwardGemm(DType::kFloat32, DType::kFloat32, 0.0f);
}

// dw (fp32) += dy^T x: the master gradient accumulates the fp32 sums, not bf16 ones.
TEST(CpuBf16OpsTest, WeightGradientAccumulatesInFp32) {
  SKIP_WITHOUT_BF16();
  const int64_t rows = 513, in = 40, out = 70;
  std::mt19937 rng(5);
  std::vector<double> x, dy, dw0;
  const Tensor xt = Random(rows, in, DType::kBFloat16, &rng, &x);
  const Tensor dyt = Random(rows, out, DType::kBFloat16, &rng, &dy);
  Tensor dw = Random(out, in, DType::kFloat32, &rng, &dw0);
  CpuBf16Ops::Get().LinearWeightGrad(xt, dyt, &dw, nullptr);
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t i = 0; i < in; ++i) {
      double sum = dw0[o * in + i], magnitude = std::abs(sum);
      for (int64_t r = 0; r < rows; ++r) {
        sum += dy[r * out + o] * x[r * in + i];
        magnitude += std::abs(dy[r * out + o] * x[r * in + i]);
      }
      ASSERT_NEAR(dw.data()[o * in + i], sum, Gamma(rows) * magnitude) << o << ", " << i;
    }
  }
}

// GELU (tanh form) and its derivative in float64 (runtime/cpu/activation.h's formulas).
double Gelu(double x) {
  const double t = std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x));
  return 0.5 * x * (1 + t);
}
double GeluDerivative(double x) {
  const double t = std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x));
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * std::sqrt(2 / M_PI) * (1 + 3 * 0.044715 * x * x);
}

// The fp32 GELU (a vectorised exp inside) errs by a few units of fp32's last place.
constexpr double kGeluError = 1e-6;

struct Linear {
  int64_t rows = 45, in = 280, out = 67;
  std::vector<double> x, w, bias;
  Tensor xt, wt, biast;
  explicit Linear(uint32_t seed) {
    std::mt19937 rng(seed);
    xt = Random(rows, in, DType::kBFloat16, &rng, &x);
    wt = Random(out, in, DType::kBFloat16, &rng, &w);
    biast = Random(1, out, DType::kFloat32, &rng, &bias);
    biast = biast.View(0, {out});
  }
  // x w^T + bias at (r, o) in float64, and the fp32 bound of its computed value.
  std::pair<double, double> Pre(int64_t r, int64_t o) const {
    double sum = bias[o], magnitude = std::abs(bias[o]);
    for (int64_t i = 0; i < in; ++i) {
      sum += x[r * in + i] * w[o * in + i];
      magnitude += std::abs(x[r * in + i] * w[o * in + i]);
    }
    return {sum, Gamma(in + 1) * magnitude};
  }
};

// One rounding to bf16 of a value known within `bound`.
double Rounded(double want, double bound) {
  return bound + kBf16Rounding * (std::abs(want) + bound);
}

// The bias joins the fp32 sums before the one rounding: two roundings (product, then
// sum) would exceed this bound somewhere among the outputs.
TEST(CpuBf16OpsTest, LinearForwardRoundsOnceAfterTheBias) {
  SKIP_WITHOUT_BF16();
  const Linear l(21);
  Tensor y = Tensor::Zeros({l.rows, l.out}, MemoryCategory::kOther, DType::kBFloat16);
  CpuBf16Ops::Get().LinearForward(l.xt, l.wt, &l.biast, &y);
  for (int64_t r = 0; r < l.rows; ++r) {
    for (int64_t o = 0; o < l.out; ++o) {
      const auto [want, bound] = l.Pre(r, o);
      ASSERT_NEAR(At(y, r * l.out + o), want, Rounded(want, bound)) << r << ", " << o;
    }
  }
}

TEST(CpuBf16OpsTest, LinearGeluForwardAppliesGeluToTheStoredPreActivation) {
  SKIP_WITHOUT_BF16();
  const Linear l(22);
  Tensor pre = Tensor::Zeros({l.rows, l.out}, MemoryCategory::kOther, DType::kBFloat16);
  Tensor y = Tensor::Zeros({l.rows, l.out}, MemoryCategory::kOther, DType::kBFloat16);
  CpuBf16Ops::Get().LinearGeluForward(l.xt, l.wt, &l.biast, &pre, &y);
  for (int64_t r = 0; r < l.rows; ++r) {
    for (int64_t o = 0; o < l.out; ++o) {
      const int64_t e = r * l.out + o;
      const auto [want, bound] = l.Pre(r, o);
      ASSERT_NEAR(At(pre, e), want, Rounded(want, bound)) << r << ", " << o;
      const double gelu = Gelu(At(pre, e));
      ASSERT_NEAR(At(y, e), gelu, Rounded(gelu, kGeluError * (std::abs(At(pre, e)) + 1)))
          << r << ", " << o;
    }
  }
}

// dx = GELU'(pre) (dy w) with one rounding. The fixture's x plays dy ([rows, 280]) and
// its w, read as [280, 67], the layer's weight; pre and dx are [rows, 67].
TEST(CpuBf16OpsTest, LinearGeluBackwardInputRoundsOnce) {
  SKIP_WITHOUT_BF16();
  const Linear l(23);
  std::mt19937 rng(24);
  std::vector<double> pre;
  const Tensor w_in_out = l.wt.View(0, {l.in, l.out});
  const Tensor pret = Random(l.rows, l.out, DType::kBFloat16, &rng, &pre);
  Tensor dx = Tensor::Zeros({l.rows, l.out}, MemoryCategory::kOther, DType::kBFloat16);
  CpuBf16Ops::Get().LinearGeluBackwardInput(l.xt, w_in_out, pret, &dx);
  for (int64_t r = 0; r < l.rows; ++r) {
    for (int64_t o = 0; o < l.out; ++o) {
      double sum = 0, magnitude = 0;
      for (int64_t i = 0; i < l.in; ++i) {
        sum += l.x[r * l.in + i] * l.w[i * l.out + o];
        magnitude += std::abs(l.x[r * l.in + i] * l.w[i * l.out + o]);
      }
      const double d = GeluDerivative(pre[r * l.out + o]);
      const double bound = std::abs(d) * Gamma(l.in) * magnitude + kGeluError * std::abs(sum);
      ASSERT_NEAR(At(dx, r * l.out + o), d * sum, Rounded(d * sum, bound)) << r << ", " << o;
    }
  }
}

// The cross-entropy over bf16 logits against float64: this rank's max, the sum of
// exponentials relative to it and the target logit (0 for a label outside the rank's
// columns), then the gradient scale * mask * (softmax - onehot) rounded once to bf16.
TEST(CpuBf16OpsTest, CrossEntropyOverBf16LogitsMatchesFloat64) {
  SKIP_WITHOUT_BF16();
  const int64_t rows = 37, vocab = 1000, vocab_start = 100;
  std::mt19937 rng(31);
  std::vector<double> z;
  Tensor logits = Random(rows, vocab, DType::kBFloat16, &rng, &z);
  std::vector<int32_t> labels(rows);
  std::vector<float> mask(rows), logsumexp(rows);
  for (int64_t t = 0; t < rows; ++t) {
    labels[t] = static_cast<int32_t>(rng() % 1200);  // some outside [100, 1100)
    mask[t] = t % 3 == 0 ? 0.0f : 1.0f;
  }
  std::vector<double> row_max(rows), sum_exp(rows), target(rows);
  CpuBf16Ops::Get().RowMaxSumExpAndTarget(logits, labels, vocab_start, absl::MakeSpan(row_max),
                                          absl::MakeSpan(sum_exp), absl::MakeSpan(target));
  for (int64_t t = 0; t < rows; ++t) {
    const double* zt = z.data() + t * vocab;
    const double m = *std::max_element(zt, zt + vocab);
    double s = 0;
    for (int64_t v = 0; v < vocab; ++v) s += std::exp(zt[v] - m);
    const int64_t local = labels[t] - vocab_start;
    EXPECT_EQ(row_max[t], m) << t;
    EXPECT_NEAR(sum_exp[t], s, 1e-5 * s) << t;  // fp32 exponentials, summed in fp32 lanes
    EXPECT_EQ(target[t], local >= 0 && local < vocab ? zt[local] : 0.0) << t;
    logsumexp[t] = static_cast<float>(m + std::log(s));
  }
  const float scale = 0.25f;
  CpuBf16Ops::Get().CrossEntropyBackward(labels, logsumexp, vocab_start, scale, mask, &logits);
  for (int64_t t = 0; t < rows; ++t) {
    for (int64_t v = 0; v < vocab; ++v) {
      const double onehot = labels[t] - vocab_start == v ? 1.0 : 0.0;
      const double want =
          scale * mask[t] * (std::exp(z[t * vocab + v] - double{logsumexp[t]}) - onehot);
      ASSERT_NEAR(At(logits, t * vocab + v), want, kBf16Rounding * std::abs(want) + 1e-7)
          << t << ", " << v;
    }
  }
}

// The residual stream's adds round where the emulation's composition rounds (after the
// bias, after the residual), so they equal its results bit for bit; and both are within
// two bf16 roundings of the float64 sums.
TEST(CpuBf16OpsTest, ResidualAddsRoundAsTheComposition) {
  SKIP_WITHOUT_BF16();
  const int64_t rows = 33, width = 70;
  std::mt19937 rng(41);
  std::vector<double> y0, residual, bias;
  const Tensor yt = Random(rows, width, DType::kBFloat16, &rng, &y0);
  const Tensor rt = Random(rows, width, DType::kBFloat16, &rng, &residual);
  Tensor bt = Random(1, width, DType::kFloat32, &rng, &bias);
  bt = bt.View(0, {width});
  const Bf16EmulationOps emulation(&CpuOps::Get());
  const CounterRng dropout_rng(7, 0);
  Tensor got = yt.Clone(MemoryCategory::kOther), want = yt.Clone(MemoryCategory::kOther);
  CpuBf16Ops::Get().BiasDropoutAdd(&bt, dropout_rng, 0.0f, 0, rt, &got);
  emulation.BiasDropoutAdd(&bt, dropout_rng, 0.0f, 0, rt, &want);
  for (int64_t i = 0; i < rows * width; ++i) {
    ASSERT_EQ(At(got, i), At(want, i)) << i;
    const double sum = y0[i] + bias[i % width] + residual[i];
    const double bound = kBf16Rounding * (std::abs(y0[i] + bias[i % width]) + 2 * std::abs(sum));
    ASSERT_NEAR(At(got, i), sum, bound) << i;
  }
  CpuBf16Ops::Get().Add(rt, &got);
  emulation.Add(rt, &want);
  CpuBf16Ops::Get().AddBias(bt, &got);
  emulation.AddBias(bt, &want);
  for (int64_t i = 0; i < rows * width; ++i) ASSERT_EQ(At(got, i), At(want, i)) << i;
}

}  // namespace
}  // namespace conveyor
