// The AVX-512 BF16 GEMM against a float64 reference over the same bf16 inputs: every
// transpose, the shapes the linear layers use, sizes off every block and vector edge,
// strided operands, alpha and beta. Skipped (and passing) on a CPU without AVX-512 BF16.
//
// The tolerance is the error of an fp32 sum of exact products (runtime/cpu/bf16_gemm.h):
// each product of two bf16 values is exact in fp32 and in float64, so the only error is
// fp32 rounding along the additions, at most gamma(d) * (|alpha| sum_k |a b| + |beta c|)
// with d = k additions, one more per block of k (blocks add into C), the alpha product
// and the beta sum (Higham, Accuracy and Stability of Numerical Algorithms, §3.1).
#include "runtime/cpu/bf16_gemm.h"

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/cpu/thread_pool.h"
#include "tests/runtime/skip_without_bf16.h"

namespace conveyor::cpu {
namespace {

struct Case {
  bool trans_a, trans_b;
  int64_t m, n, k;
  float alpha, beta;
  int64_t pad = 0;  // extra elements per stored row (strided operands)
};

std::vector<BFloat16> RandomBf16(int64_t count, std::mt19937* rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<BFloat16> out(count);
  for (BFloat16& x : out) x = ToBFloat16(normal(*rng));
  return out;
}

double Gamma(int64_t additions) {
  const double u = std::ldexp(1.0, -24);
  return additions * u / (1 - additions * u);
}

void ExpectMatchesFloat64(const Case& t) {
  std::mt19937 rng(static_cast<uint32_t>(t.m * 131 + t.n * 17 + t.k));
  const int64_t lda = (t.trans_a ? t.m : t.k) + t.pad, ldb = (t.trans_b ? t.k : t.n) + t.pad;
  const int64_t ldc = t.n + t.pad;
  const std::vector<BFloat16> a = RandomBf16((t.trans_a ? t.k : t.m) * lda, &rng);
  const std::vector<BFloat16> b = RandomBf16((t.trans_b ? t.n : t.k) * ldb, &rng);
  std::vector<float> c(t.m * ldc, std::numeric_limits<float>::quiet_NaN());
  if (t.beta != 0.0f) {
    std::normal_distribution<float> normal(0.0f, 4.0f);
    for (float& x : c) x = normal(rng);
  }
  const std::vector<float> c0 = c;
  Bf16Gemm(t.trans_a, t.trans_b, t.m, t.n, t.k, t.alpha, a.data(), lda, b.data(), ldb, t.beta,
           c.data(), ldc);
  const int64_t blocks = (t.k + kBf16GemmBlockK - 1) / kBf16GemmBlockK;
  const double gamma = Gamma(t.k + blocks + 2);
  for (int64_t i = 0; i < t.m; ++i) {
    for (int64_t j = 0; j < t.n; ++j) {
      double sum = 0, magnitude = 0;
      for (int64_t kk = 0; kk < t.k; ++kk) {
        const double x = ToFloat(a[t.trans_a ? kk * lda + i : i * lda + kk]);
        const double y = ToFloat(b[t.trans_b ? j * ldb + kk : kk * ldb + j]);
        sum += x * y;
        magnitude += std::abs(x * y);
      }
      const double old = t.beta != 0.0f ? c0[i * ldc + j] : 0.0;
      const double want = t.alpha * sum + t.beta * old;
      const double bound = gamma * (std::abs(t.alpha) * magnitude + std::abs(t.beta * old));
      ASSERT_NEAR(c[i * ldc + j], want, bound) << "C[" << i << ", " << j << "]";
    }
    for (int64_t j = t.n; j < ldc; ++j) {  // the padding of C's rows is not written
      ASSERT_TRUE(std::isnan(c[i * ldc + j]) || c[i * ldc + j] == c0[i * ldc + j]);
    }
  }
}

TEST(Bf16GemmTest, LinearLayerShapesMatchFloat64) {
  SKIP_WITHOUT_BF16();
  // y = x w^T, dx = dy w, dw += dy^T x (runtime/ops.h), at a small layer's sizes.
  ExpectMatchesFloat64({false, true, 96, 192, 64, 1.0f, 0.0f});
  ExpectMatchesFloat64({false, false, 96, 64, 192, 1.0f, 0.0f});
  ExpectMatchesFloat64({true, false, 192, 64, 96, 1.0f, 1.0f});
}

TEST(Bf16GemmTest, EveryTransposeAtOddSizesMatchesFloat64) {
  SKIP_WITHOUT_BF16();
  // m off the 6-row micro-tile and the 96-row block, n off the 16-column vector and the
  // 64-column panel, k odd (a half pair) and across the 512-deep blocks of k.
  for (const bool trans_a : {false, true}) {
    for (const bool trans_b : {false, true}) {
      for (const int64_t k : {1, 3, 511, 513, 1101}) {
        ExpectMatchesFloat64({trans_a, trans_b, 97, 130, k, 1.0f, 0.0f});
        ExpectMatchesFloat64({trans_a, trans_b, 13, 17, k, -0.75f, 0.5f});
        ExpectMatchesFloat64({trans_a, trans_b, 1, 1, k, 2.0f, 1.0f});
      }
    }
  }
}

// Past kMaxPackedBBytes, op(B) is packed one group of panels at a time (gemm_tiles.h):
// two groups and part of a third here, at k = 1101 (three blocks of k a panel).
TEST(Bf16GemmTest, GroupsOfPackedPanelsMatchFloat64) {
  SKIP_WITHOUT_BF16();
  const int64_t panel_bytes = 3 * (kBf16GemmBlockK / 2) * 64 * sizeof(uint32_t);
  const int64_t n = (2 * (kMaxPackedBBytes / panel_bytes) + 1) * 64 + 5;
  for (const bool trans_a : {false, true}) {
    for (const bool trans_b : {false, true}) {
      ExpectMatchesFloat64({trans_a, trans_b, 5, n, 1101, 1.0f, 0.5f});
    }
  }
}

TEST(Bf16GemmTest, StridedOperandsMatchFloat64) {
  SKIP_WITHOUT_BF16();
  for (const bool trans_a : {false, true}) {
    for (const bool trans_b : {false, true}) {
      ExpectMatchesFloat64({trans_a, trans_b, 29, 70, 601, 1.0f, 1.0f, /*pad=*/5});
    }
  }
}

TEST(Bf16GemmTest, EmptyDepthScalesC) {
  SKIP_WITHOUT_BF16();
  std::vector<float> c = {1.0f, -2.0f, 3.0f, 4.0f};
  Bf16Gemm(false, false, 2, 2, 0, 1.0f, nullptr, 0, nullptr, 2, 0.5f, c.data(), 2);
  EXPECT_EQ(c, (std::vector<float>{0.5f, -1.0f, 1.5f, 2.0f}));
}

// Each element of C is one thread's sum in a fixed order, however the tiles fall.
TEST(Bf16GemmTest, ThreadCountDoesNotChangeABit) {
  SKIP_WITHOUT_BF16();
  std::mt19937 rng(7);
  const int64_t m = 200, n = 300, k = 600;
  const std::vector<BFloat16> a = RandomBf16(m * k, &rng), b = RandomBf16(n * k, &rng);
  std::vector<std::vector<float>> results;
  const int threads = PoolThreads();
  for (const int t : {1, 2, 5}) {
    SetPoolThreads(t);
    results.emplace_back(m * n);
    Bf16Gemm(false, true, m, n, k, 1.0f, a.data(), k, b.data(), k, 0.0f, results.back().data(), n);
  }
  SetPoolThreads(threads);
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
}

}  // namespace
}  // namespace conveyor::cpu
