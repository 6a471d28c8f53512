// The AVX-512 fp32 GEMM against a float64 reference: every transpose, sizes off every
// micro-tile, panel and block edge, strided operands, alpha and beta; its epilogue's
// tiles; and GemmThen (runtime/cpu/gemm.h) through both kernels. The kernel's tests skip
// (and pass) on a CPU without AVX-512, saying so.
//
// The tolerance is the kernel's error bound (runtime/cpu/f32_gemm.h): a product of two
// fp32 values is exact in float64 and inside a fused multiply-add, so the only error is
// fp32 rounding along the additions, at most gamma(d) * (|alpha| sum_k |a b| + |beta c|),
// d = k + 2 per block of k + 2 (Higham, Accuracy and Stability of Numerical Algorithms,
// §3.1).
#include "runtime/cpu/f32_gemm.h"

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/cpu/gemm.h"
#include "runtime/cpu/thread_pool.h"

namespace conveyor::cpu {
namespace {

#define SKIP_WITHOUT_AVX512()                                                          \
  do {                                                                                 \
    if (!HasF32Gemm()) {                                                               \
      GTEST_SKIP() << "this CPU has no AVX-512 (no avx512f in /proc/cpuinfo), so the " \
                      "fp32 kernel cannot run here (OpenBLAS does its GEMMs)";         \
    }                                                                                  \
  } while (0)

struct Case {
  bool trans_a, trans_b;
  int64_t m, n, k;
  float alpha, beta;
  int64_t pad = 0;  // extra elements per stored row (strided operands)
};

std::vector<float> Random(int64_t count, float scale, std::mt19937* rng) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> out(count);
  for (float& x : out) x = normal(*rng);
  return out;
}

void ExpectMatchesFloat64(const Case& t) {
  std::mt19937 rng(static_cast<uint32_t>(t.m * 131 + t.n * 17 + t.k));
  const int64_t lda = (t.trans_a ? t.m : t.k) + t.pad, ldb = (t.trans_b ? t.k : t.n) + t.pad;
  const int64_t ldc = t.n + t.pad;
  const std::vector<float> a = Random((t.trans_a ? t.k : t.m) * lda, 1.0f, &rng);
  const std::vector<float> b = Random((t.trans_b ? t.n : t.k) * ldb, 1.0f, &rng);
  std::vector<float> c(t.m * ldc, std::numeric_limits<float>::quiet_NaN());
  if (t.beta != 0.0f) c = Random(t.m * ldc, 4.0f, &rng);
  const std::vector<float> c0 = c;
  F32Gemm(t.trans_a, t.trans_b, t.m, t.n, t.k, t.alpha, a.data(), lda, b.data(), ldb, t.beta,
          c.data(), ldc);
  const int64_t d = t.k + 2 * ((t.k + kF32GemmBlockK - 1) / kF32GemmBlockK) + 2;
  const double gamma = d * std::ldexp(1.0, -24) / (1 - d * std::ldexp(1.0, -24));
  for (int64_t i = 0; i < t.m; ++i) {
    for (int64_t j = 0; j < t.n; ++j) {
      double sum = 0, magnitude = 0;
      for (int64_t kk = 0; kk < t.k; ++kk) {
        const double p = double{a[t.trans_a ? kk * lda + i : i * lda + kk]} *
                         b[t.trans_b ? j * ldb + kk : kk * ldb + j];
        sum += p;
        magnitude += std::abs(p);
      }
      const double old = t.beta != 0.0f ? c0[i * ldc + j] : 0.0;
      const double bound = gamma * (std::abs(t.alpha) * magnitude + std::abs(t.beta * old));
      ASSERT_NEAR(c[i * ldc + j], t.alpha * sum + t.beta * old, bound)
          << "C[" << i << ", " << j << "]";
    }
    for (int64_t j = t.n; j < ldc; ++j) {  // the padding of C's rows is not written
      ASSERT_EQ(std::isnan(c[i * ldc + j]), std::isnan(c0[i * ldc + j]));
      if (!std::isnan(c0[i * ldc + j])) {
        ASSERT_EQ(c[i * ldc + j], c0[i * ldc + j]);
      }
    }
  }
}

TEST(F32GemmTest, LinearLayerShapesMatchFloat64) {
  SKIP_WITHOUT_AVX512();
  // y = x w^T, dx = dy w, dw += dy^T x (runtime/ops.h), at a small layer's sizes.
  ExpectMatchesFloat64({false, true, 192, 256, 128, 1.0f, 0.0f});
  ExpectMatchesFloat64({false, false, 192, 128, 256, 1.0f, 0.0f});
  ExpectMatchesFloat64({true, false, 256, 128, 192, 1.0f, 1.0f});
}

TEST(F32GemmTest, EveryTransposeAtOddSizesMatchesFloat64) {
  SKIP_WITHOUT_AVX512();
  // m off the 6-row micro-tile and the 96-row block, n off the 16-column vector and the
  // 64-column panel, k across the 256-deep blocks of k.
  for (const bool trans_a : {false, true}) {
    for (const bool trans_b : {false, true}) {
      for (const int64_t k : {1, 7, 255, 257, 700}) {
        ExpectMatchesFloat64({trans_a, trans_b, 97, 130, k, 1.0f, 0.0f});
        ExpectMatchesFloat64({trans_a, trans_b, 13, 17, k, -0.75f, 0.5f});
        ExpectMatchesFloat64({trans_a, trans_b, 1, 1, k, 2.0f, 1.0f});
      }
    }
  }
}

// Columns of op(B) for two groups of packed panels and part of a third, at k = 300: past
// kMaxPackedBBytes, op(B) is packed one group at a time (gemm_tiles.h).
int64_t ColumnsPastTwoPackedGroups() {
  const int64_t panel_bytes = 2 * kF32GemmBlockK * 64 * sizeof(float);  // two blocks of k
  return (2 * (kMaxPackedBBytes / panel_bytes) + 1) * 64 + 5;
}

TEST(F32GemmTest, GroupsOfPackedPanelsMatchFloat64) {
  SKIP_WITHOUT_AVX512();
  for (const bool trans_a : {false, true}) {
    for (const bool trans_b : {false, true}) {
      ExpectMatchesFloat64({trans_a, trans_b, 5, ColumnsPastTwoPackedGroups(), 300, 1.0f, 0.5f});
    }
  }
}

TEST(F32GemmTest, StridedOperandsMatchFloat64) {
  SKIP_WITHOUT_AVX512();
  for (const bool trans_a : {false, true}) {
    for (const bool trans_b : {false, true}) {
      ExpectMatchesFloat64({trans_a, trans_b, 29, 70, 601, 1.0f, 1.0f, /*pad=*/5});
    }
  }
}

TEST(F32GemmTest, EmptyDepthScalesC) {
  SKIP_WITHOUT_AVX512();
  std::vector<float> c = {1.0f, -2.0f, 3.0f, 4.0f};
  F32Gemm(false, false, 2, 2, 0, 1.0f, nullptr, 0, nullptr, 2, 0.5f, c.data(), 2);
  EXPECT_EQ(c, (std::vector<float>{0.5f, -1.0f, 1.5f, 2.0f}));
  std::vector<float> nan(4, std::numeric_limits<float>::quiet_NaN());
  F32Gemm(false, false, 2, 2, 0, 1.0f, nullptr, 0, nullptr, 2, 0.0f, nan.data(), 2);
  EXPECT_EQ(nan, std::vector<float>(4, 0.0f));  // beta 0: C is not read
}

// Each element of C is one thread's sum in a fixed order, however the tiles fall.
TEST(F32GemmTest, ThreadCountDoesNotChangeABit) {
  SKIP_WITHOUT_AVX512();
  std::mt19937 rng(7);
  const int64_t m = 200, n = 300, k = 600;
  const std::vector<float> a = Random(m * k, 1.0f, &rng), b = Random(n * k, 1.0f, &rng);
  std::vector<std::vector<float>> results;
  const int threads = PoolThreads();
  for (const int t : {1, 2, 5}) {
    SetPoolThreads(t);
    results.emplace_back(m * n);
    F32Gemm(false, true, m, n, k, 1.0f, a.data(), k, b.data(), k, 0.0f, results.back().data(), n);
  }
  SetPoolThreads(threads);
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
}

// GemmThen hands every element of C to the epilogue exactly once, after its sum is
// final, with the tile's values where the tile says: through the AVX-512 kernel's tiles
// and through OpenBLAS's bands of rows alike.
void ExpectEveryFinishedElementOnce(int64_t m, int64_t n, int64_t k) {
  std::mt19937 rng(11);
  const std::vector<float> a = Random(m * k, 1.0f, &rng), b = Random(k * n, 1.0f, &rng);
  for (const bool packed : {true, false}) {
    if (packed && !HasF32Gemm()) continue;
    UsePackedF32Gemm(packed);
    std::vector<float> c(m * n), seen(m * n), plain(m * n);
    std::vector<int> visits(m * n, 0);
    GemmThen(false, false, m, n, k, 1.0f, a.data(), b.data(), 0.0f, c.data(),
             [&](const GemmTile& tile) {
               ASSERT_EQ(tile.values, c.data() + tile.row * n + tile.col);
               ASSERT_EQ(tile.ld, n);
               for (int64_t i = 0; i < tile.rows; ++i) {
                 for (int64_t j = 0; j < tile.cols; ++j) {
                   const int64_t at = (tile.row + i) * n + tile.col + j;
                   ++visits[at];
                   seen[at] = tile.values[i * tile.ld + j];
                 }
               }
             });
    Gemm(false, false, m, n, k, 1.0f, a.data(), b.data(), 0.0f, plain.data());
    EXPECT_EQ(visits, std::vector<int>(m * n, 1)) << (packed ? "AVX-512 kernel" : "OpenBLAS");
    EXPECT_EQ(seen, plain) << (packed ? "AVX-512 kernel" : "OpenBLAS");
  }
  UsePackedF32Gemm(true);
}

// Also past kMaxPackedBBytes, where each group of packed panels hands its own tiles.
TEST(F32GemmTest, GemmThenHandsEveryFinishedElementOnce) {
  for (const auto& [m, n] :
       {std::pair<int64_t, int64_t>{301, 517}, {7, ColumnsPastTwoPackedGroups()}}) {
    ExpectEveryFinishedElementOnce(m, n, /*k=*/300);
  }
}

}  // namespace
}  // namespace conveyor::cpu
