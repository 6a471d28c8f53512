// --bf16's GEMMs on a CPU with AVX-512 BF16 (CpuBf16Ops) against float64: a bf16 output
// is the fp32 sum of exact products rounded once, weight gradients accumulate into their
// fp32 tensors unrounded, and fp32 operands are not rounded to bf16; the ops that read
// bf16 rows in chunks (norms, dropout, cross-entropy, adds, bias gradients) against
// float64 and bit for bit against the emulation. Skipped (and passing) on a CPU without
// AVX-512 BF16.
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
void ExpectForwardGemm(DType operands, DType out, float beta, int64_t m = 37, int64_t n = 75,
                       int64_t k = 300) {
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
  // Many tiles of rows and columns, and blocks of k added before the one rounding.
  ExpectForwardGemm(DType::kBFloat16, DType::kBFloat16, 0.5f, 200, 700, 1100);
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

// The ops below read bf16 a chunk of rows at a time (more than one chunk at these
// widths) and must give the emulation's results bit for bit.
void ExpectSameBits(const Tensor& got, const Tensor& want) {
  ASSERT_EQ(got.numel(), want.numel());
  for (int64_t i = 0; i < got.numel(); ++i) ASSERT_EQ(At(got, i), At(want, i)) << i;
}

Tensor Like(const Tensor& t) { return Tensor::Zeros(t.shape(), MemoryCategory::kOther, t.dtype()); }

// LayerNorm and RMSNorm (runtime/cpu/norm.h's formulas) in float64 on the bf16 inputs:
// forward within one bf16 rounding plus fp32's error, the weight gradients within
// fp32's error of their float64 sums, and every result the emulation's bit for bit.
void ExpectNormMatches(NormKind kind) {
  const int64_t rows = 70, width = 1000;
  std::mt19937 rng(kind == NormKind::kLayerNorm ? 51 : 52);
  std::vector<double> x, dy, gamma, beta;
  const Tensor xt = Random(rows, width, DType::kBFloat16, &rng, &x);
  const Tensor dyt = Random(rows, width, DType::kBFloat16, &rng, &dy);
  const Tensor gt = Random(1, width, DType::kFloat32, &rng, &gamma).View(0, {width});
  const Tensor bt = Random(1, width, DType::kFloat32, &rng, &beta).View(0, {width});
  const Tensor* b = kind == NormKind::kLayerNorm ? &bt : nullptr;
  const Bf16EmulationOps emulation(&CpuOps::Get());
  const Ops* both[] = {&CpuBf16Ops::Get(), &emulation};
  Tensor y[2], mean[2], rstd[2], dx[2], dgamma[2], dbeta[2];
  for (int o = 0; o < 2; ++o) {
    y[o] = Like(xt), dx[o] = Like(xt);
    mean[o] = Tensor::Zeros({rows}, MemoryCategory::kOther), rstd[o] = Like(mean[o]);
    dgamma[o] = Like(gt), dbeta[o] = Like(gt);
    both[o]->NormForward(kind, xt, gt, b, 1e-5f, &y[o], &mean[o], &rstd[o]);
    both[o]->NormBackwardInput(kind, dyt, xt, gt, mean[o], rstd[o], &dx[o]);
    both[o]->NormBackwardWeight(dyt, xt, mean[o], rstd[o], &dgamma[o], &dbeta[o]);
  }
  for (Tensor* t : {y, mean, rstd, dx, dgamma, dbeta}) ExpectSameBits(t[0], t[1]);
  std::vector<double> dgamma_want(width, 0.0), dbeta_want(width, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    double mu = 0, square = 0;
    for (int64_t j = 0; j < width; ++j) mu += x[r * width + j] / width;
    if (kind == NormKind::kRmsNorm) mu = 0;
    for (int64_t j = 0; j < width; ++j) square += std::pow(x[r * width + j] - mu, 2) / width;
    const double rs = 1 / std::sqrt(square + 1e-5);
    for (int64_t j = 0; j < width; ++j) {
      const double xhat = (x[r * width + j] - mu) * rs;
      const double want = xhat * gamma[j] + (b != nullptr ? beta[j] : 0.0);
      ASSERT_NEAR(At(y[0], r * width + j), want, kBf16Rounding * std::abs(want) + 1e-5) << r;
      dgamma_want[j] += dy[r * width + j] * xhat;
      dbeta_want[j] += dy[r * width + j];
    }
  }
  for (int64_t j = 0; j < width; ++j) {
    ASSERT_NEAR(dgamma[0].data()[j], dgamma_want[j], 1e-4) << j;
    ASSERT_NEAR(dbeta[0].data()[j], dbeta_want[j], 1e-4) << j;
  }
}

TEST(CpuBf16OpsTest, NormsMatchFloat64AndTheEmulation) {
  SKIP_WITHOUT_BF16();
  ExpectNormMatches(NormKind::kLayerNorm);
  ExpectNormMatches(NormKind::kRmsNorm);
}

// Inverted dropout (runtime/cpu/dropout.h): each value kept and scaled by 1 / (1 - p) or
// zeroed, one rounding of the kept ones; the mask the emulation draws, element by element.
TEST(CpuBf16OpsTest, DropoutMatchesTheEmulation) {
  SKIP_WITHOUT_BF16();
  const int64_t rows = 40, width = 2000;
  std::mt19937 rng(61);
  std::vector<double> x;
  const Tensor xt = Random(rows, width, DType::kBFloat16, &rng, &x);
  const Bf16EmulationOps emulation(&CpuOps::Get());
  const CounterRng dropout_rng(9, 3);
  for (const float p : {0.0f, 0.3f}) {
    Tensor got = Like(xt), want = Like(xt);
    CpuBf16Ops::Get().Dropout(dropout_rng, p, 1000, xt, &got);
    emulation.Dropout(dropout_rng, p, 1000, xt, &want);
    ExpectSameBits(got, want);
    int64_t kept = 0;
    for (int64_t i = 0; i < rows * width; ++i) {
      const double scaled = x[i] / (1.0 - p);
      if (At(got, i) == 0.0 && x[i] != 0.0) continue;
      ++kept;
      ASSERT_NEAR(At(got, i), scaled, kBf16Rounding * std::abs(scaled)) << i;
    }
    EXPECT_NEAR(static_cast<double>(kept) / (rows * width), 1.0 - p, 0.01) << p;
  }
}

// dbias += the column sums of bf16 dy: fp32 sums of its rows in order, the emulation's.
TEST(CpuBf16OpsTest, BiasGradientIsTheFp32ColumnSum) {
  SKIP_WITHOUT_BF16();
  const int64_t rows = 300, width = 130;
  std::mt19937 rng(71);
  std::vector<double> dy, db0;
  const Tensor dyt = Random(rows, width, DType::kBFloat16, &rng, &dy);
  const Tensor db = Random(1, width, DType::kFloat32, &rng, &db0).View(0, {width});
  Tensor got = db.Clone(MemoryCategory::kOther), want = db.Clone(MemoryCategory::kOther);
  CpuBf16Ops::Get().AccumulateBiasGrad(dyt, &got);
  Bf16EmulationOps(&CpuOps::Get()).AccumulateBiasGrad(dyt, &want);
  ExpectSameBits(got, want);
  for (int64_t j = 0; j < width; ++j) {
    double sum = db0[j], magnitude = std::abs(db0[j]);
    for (int64_t r = 0; r < rows; ++r) {
      sum += dy[r * width + j];
      magnitude += std::abs(dy[r * width + j]);
    }
    ASSERT_NEAR(got.data()[j], sum, Gamma(rows) * magnitude) << j;
  }
}

// fp32 -> bf16 within half a unit in bf16's last place (at most 2^-8 of the value), and
// back exactly; both the emulation's bits.
TEST(CpuBf16OpsTest, CastsMatchTheEmulation) {
  SKIP_WITHOUT_BF16();
  std::mt19937 rng(81);
  std::vector<double> x;
  const Tensor xt = Random(300, 257, DType::kFloat32, &rng, &x);
  const Bf16EmulationOps emulation(&CpuOps::Get());
  Tensor got = Tensor::Zeros(xt.shape(), MemoryCategory::kOther, DType::kBFloat16);
  Tensor want = Like(got);
  CpuBf16Ops::Get().Cast(xt, &got);
  emulation.Cast(xt, &want);
  ExpectSameBits(got, want);
  for (int64_t i = 0; i < xt.numel(); ++i) {
    ASSERT_NEAR(At(got, i), x[i], kBf16Rounding * std::abs(x[i])) << i;
  }
  Tensor back = Like(xt), back_want = Like(xt);
  CpuBf16Ops::Get().Cast(got, &back);
  emulation.Cast(got, &back_want);
  ExpectSameBits(back, back_want);
  for (int64_t i = 0; i < xt.numel(); ++i) ASSERT_EQ(back.data()[i], At(got, i)) << i;
}

// out[t] = table[ids[t] - vocab_start], zero rows for ids outside the table's rows.
TEST(CpuBf16OpsTest, EmbeddingLookupCopiesTheBf16Rows) {
  SKIP_WITHOUT_BF16();
  const int64_t rows = 50, width = 70, vocab_start = 100;
  std::mt19937 rng(91);
  std::vector<double> table;
  const Tensor tt = Random(rows, width, DType::kBFloat16, &rng, &table);
  std::vector<int32_t> ids(333);
  for (int32_t& id : ids) id = static_cast<int32_t>(rng() % 200);  // some outside [100, 150)
  const int64_t count = static_cast<int64_t>(ids.size());
  Tensor got = Tensor::Zeros({count, width}, MemoryCategory::kOther, DType::kBFloat16);
  Tensor want = Like(got);
  CpuBf16Ops::Get().EmbeddingForward(tt, vocab_start, ids, &got);
  Bf16EmulationOps(&CpuOps::Get()).EmbeddingForward(tt, vocab_start, ids, &want);
  ExpectSameBits(got, want);
  for (int64_t t = 0; t < count; ++t) {
    const int64_t row = ids[t] - vocab_start;
    for (int64_t j = 0; j < width; ++j) {
      const double expected = row >= 0 && row < rows ? table[row * width + j] : 0.0;
      ASSERT_EQ(At(got, t * width + j), expected) << t << ", " << j;
    }
  }
}

}  // namespace
}  // namespace conveyor
