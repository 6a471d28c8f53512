// The CPU attention's tile products and transposition (runtime/cpu/attention_tiles.h),
// through every kernel this CPU runs, against a float64 product written here: shapes
// that leave partial micro-tiles (rows not a multiple of 6, columns not a multiple of
// 16, head dims 48, 80 and 192), A stored either way, operands inside wider rows.
#include "runtime/cpu/attention_tiles.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace conveyor::cpu {
namespace {

std::vector<TileKernel> Kernels() {
  std::vector<TileKernel> kernels = {TileKernel::kBlas};
  if (BestTileKernel() == TileKernel::kAvx512) kernels.push_back(TileKernel::kAvx512);
  return kernels;
}

std::vector<float> Random(int64_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal;
  std::vector<float> v(n);
  for (float& x : v) x = normal(gen);
  return v;
}

struct Shape {
  int64_t m, n, k;
};

// m, n, k from a single element to the attention's shapes: a 32-row tile of queries
// against up to 256 keys, head dims 48 / 64 / 80 / 192, a value head of 128.
std::vector<Shape> Shapes() {
  return {{1, 1, 1},     {5, 17, 3},    {7, 48, 33},    {13, 80, 64}, {32, 192, 64},
          {32, 100, 48}, {100, 64, 32}, {32, 128, 256}, {6, 64, 256}, {31, 33, 192}};
}

// C = alpha A B (+ C0), A [m, k] stored row-major (lda = k + 3) or transposed
// (A^T [k, m], lda = m + 5), B [k, n] inside rows of n + 7, C inside rows of n + 2: the
// float64 sum, each element within the fp32 summation bound k eps sum |a b| (Higham,
// "Accuracy and Stability of Numerical Algorithms", 2002, §3.1) plus C0's rounding.
void CheckProduct(TileKernel kernel, const Shape& sh, bool a_transposed, bool accumulate) {
  const int64_t lda = a_transposed ? sh.m + 5 : sh.k + 3, ldb = sh.n + 7, ldc = sh.n + 2;
  const int64_t a_rows = a_transposed ? sh.k : sh.m;
  const std::vector<float> a = Random(a_rows * lda, 1), b = Random(sh.k * ldb, 2);
  const std::vector<float> c0 = Random(sh.m * ldc, 3);
  std::vector<float> c = c0;
  const float alpha = 0.75f;
  const int64_t a_rs = a_transposed ? 1 : lda, a_cs = a_transposed ? lda : 1;
  TileGemm(kernel, {sh.m, sh.n, sh.k, alpha, a.data(), a_rs, a_cs, b.data(), ldb, c.data(), ldc,
                    accumulate});
  const double eps = std::ldexp(1.0, -24);
  for (int64_t i = 0; i < sh.m; ++i) {
    for (int64_t j = 0; j < sh.n; ++j) {
      double sum = 0.0, magnitude = 0.0;
      for (int64_t kk = 0; kk < sh.k; ++kk) {
        const double term = static_cast<double>(a[i * a_rs + kk * a_cs]) * b[kk * ldb + j];
        sum += term;
        magnitude += std::fabs(term);
      }
      const double old = accumulate ? c0[i * ldc + j] : 0.0;
      const double want = alpha * sum + old;
      const double bound = (sh.k + 2) * eps * (alpha * magnitude + std::fabs(old)) + 1e-30;
      ASSERT_NEAR(c[i * ldc + j], want, bound)
          << "kernel " << static_cast<int>(kernel) << " m " << sh.m << " n " << sh.n << " k "
          << sh.k << " at (" << i << ", " << j << ")";
    }
    for (int64_t j = sh.n; j < ldc; ++j) {  // past n: untouched
      ASSERT_EQ(c[i * ldc + j], c0[i * ldc + j]) << "column " << j << " of row " << i;
    }
  }
}

TEST(TileGemmTest, MatchesFloat64ProductOnEdgeShapes) {
  for (TileKernel kernel : Kernels()) {
    for (const Shape& sh : Shapes()) {
      for (bool a_transposed : {false, true}) {
        for (bool accumulate : {false, true}) CheckProduct(kernel, sh, a_transposed, accumulate);
      }
    }
  }
}

TEST(TransposeRowsTest, CopiesEveryElementToItsTransposedPlace) {
  struct Case {
    int64_t rows, cols;
  };
  for (TileKernel kernel : Kernels()) {
    for (const Case& t : {Case{1, 1}, Case{17, 48}, Case{256, 64}, Case{33, 192}, Case{100, 80},
                          Case{16, 16}, Case{5, 3}}) {
      const int64_t ld = t.cols + 9, ld_out = t.rows + 5;
      const std::vector<float> in = Random(t.rows * ld, 4);
      std::vector<float> out(t.cols * ld_out + 1, -7.0f);  // one past the end: untouched
      TransposeRows(kernel, t.rows, t.cols, in.data(), ld, out.data(), ld_out);
      for (int64_t c = 0; c < t.cols; ++c) {
        for (int64_t r = 0; r < ld_out; ++r) {  // past the rows: untouched
          ASSERT_EQ(out[c * ld_out + r], r < t.rows ? in[r * ld + c] : -7.0f)
              << t.rows << " x " << t.cols << " at (" << r << ", " << c << ")";
        }
      }
      EXPECT_EQ(out.back(), -7.0f);
    }
  }
}

}  // namespace
}  // namespace conveyor::cpu
