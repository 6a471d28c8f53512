#include "runtime/cpu/f32_gemm.h"

#include <immintrin.h>

#include <algorithm>

#include "runtime/cpu/avx512_tile.h"
#include "runtime/cpu/thread_pool.h"

// Only the functions marked CONVEYOR_AVX512_TARGET use AVX-512, through the target
// attribute rather than -mavx512f on the file (runtime/cpu/bf16_gemm.cc says why).
#define CONVEYOR_AVX512_TARGET __attribute__((target("avx512f")))

namespace conveyor::cpu {
namespace {

// A micro-tile of C is kMr rows by kNr columns, its sums in 24 of the 32 zmm registers;
// each step of k loads kNv vectors of packed B and broadcasts each of the kMr rows' A
// element against them (24 multiply-adds for 4 loads and 6 broadcasts). A is read where
// it lies, one element per row and step (rows of A stay in L2 for the tile); packing A
// as well ran slower on Zen 4. B is packed once per call into kNr-column panels of one
// block of k (64 KiB), which each tile's row panels reuse from L2.
constexpr int kMr = 6;
constexpr int kNv = 4;
constexpr int64_t kNr = 16 * kNv;
// Rows of C per tile: measured in the training step on Zen 4, blocks of 48 rows ran the
// forward and input-gradient products (A row-major) 2-8% faster than blocks of 96, and
// the weight gradients (A stored transposed) 5% slower.
constexpr int64_t kRowsPerBlockRowMajorA = kMr * 8;
constexpr int64_t kRowsPerBlockKMajorA = kMr * 16;
constexpr int64_t kMaxPanelsPerTile = 8;
constexpr int64_t kBlockK = kF32GemmBlockK;

// op(B) as [k, n]: element (kk, j) at p[kk * kk_stride + j * j_stride].
struct OperandB {
  const float* p;
  int64_t kk_stride, j_stride, n, k;
};

// out[kk * kNr + j] = op(B)(k0 + kk, j0 + j) for kk < depth, j < kNr; zero past n.
CONVEYOR_AVX512_TARGET void PackPanel(const OperandB& b, int64_t j0, int64_t k0, int64_t depth,
                                      float* out) {
  const int64_t cols = std::min(kNr, b.n - j0);
  if (b.j_stride == 1) {  // rows of op(B) are stored rows: copies
    for (int64_t kk = 0; kk < depth; ++kk) {
      const float* src = b.p + (k0 + kk) * b.kk_stride + j0;
      for (int64_t v = 0; v < kNr; v += 16) {
        _mm512_storeu_ps(out + kk * kNr + v, _mm512_maskz_loadu_ps(FirstLanes(cols - v), src + v));
      }
    }
    return;
  }
  // op(B) = stored B transposed (b.kk_stride 1): each stored row is a column, moved in
  // 16 x 16 blocks through registers.
  for (int64_t j = 0; j < kNr; j += 16) {
    for (int64_t kk = 0; kk < depth; kk += 16) {
      const __mmask16 steps = FirstLanes(depth - kk);
      __m512 x[16];
      for (int r = 0; r < 16; ++r) {
        x[r] = j + r < cols
                   ? _mm512_maskz_loadu_ps(steps, b.p + (j0 + j + r) * b.j_stride + k0 + kk)
                   : _mm512_setzero_ps();
      }
      Transpose16(x);
      for (int c = 0; c < 16 && kk + c < depth; ++c) {
        _mm512_storeu_ps(out + (kk + c) * kNr + j, x[c]);
      }
    }
  }
}

// C's micro-tile c[0:rows, 0:cols] = alpha * sum + beta * C (beta 0: C not read), sum over
// `depth` steps: row r's element of step kk at a[r * row_stride + kk * k_stride], B's
// packed panel at bp.
CONVEYOR_AVX512_TARGET void MicroTile(int64_t depth, const float* a, int64_t row_stride,
                                      int64_t k_stride, const float* next_a, const float* bp,
                                      float alpha, float beta, float* c, int64_t ldc, int rows,
                                      int64_t cols) {
  __m512 acc[kMr][kNv];
#pragma GCC unroll 8
  for (int r = 0; r < kMr; ++r) {
#pragma GCC unroll 8
    for (int v = 0; v < kNv; ++v) acc[r][v] = _mm512_setzero_ps();
  }
  const float* row[kMr];  // rows past the edge repeat the last one; their sums are dropped
#pragma GCC unroll 8
  for (int r = 0; r < kMr; ++r) row[r] = a + std::min(r, rows - 1) * row_stride;
  for (int64_t kk = 0; kk < depth; ++kk, bp += kNr) {
    // The next micro-tile's A, one element a step, row after row: over 16 steps every
    // line of its rows (row-major A) or of its steps (k-major) is asked for once at least.
    _mm_prefetch(reinterpret_cast<const char*>(next_a + (kk % kMr) * row_stride + kk * k_stride),
                 _MM_HINT_T0);
    __m512 bv[kNv];
#pragma GCC unroll 8
    for (int v = 0; v < kNv; ++v) bv[v] = _mm512_loadu_ps(bp + 16 * v);
#pragma GCC unroll 8
    for (int r = 0; r < kMr; ++r) {
      const __m512 av = _mm512_set1_ps(row[r][kk * k_stride]);
#pragma GCC unroll 8
      for (int v = 0; v < kNv; ++v) acc[r][v] = _mm512_fmadd_ps(av, bv[v], acc[r][v]);
    }
  }
  StoreMicroTile(acc, alpha, beta, c, ldc, rows, cols);
}

// The product: A where it lies (element (i, kk) of op(A) at a[i * row_stride + kk *
// k_stride]) and op(B) packed, panel jp of block kb at bp + (kb * panels + jp) * kBlockK * kNr.
struct Product {
  const float* a;
  int64_t row_stride, k_stride, m, n, k;
  const float* bp;
  int64_t panels;
  float alpha, beta;
  float* c;
  int64_t ldc;
};

int64_t DepthOf(int64_t k, int64_t kb) { return std::min(kBlockK, k - kb * kBlockK); }

// One tile of C, block of k after block: the first scales C by beta, the others add.
CONVEYOR_AVX512_TARGET void ComputeTile(const Product& p, const GemmTileRange& t) {
  const int64_t row_panels = (t.i1 - t.i0 + kMr - 1) / kMr;
  for (int64_t kb = 0; kb * kBlockK < p.k; ++kb) {
    const int64_t depth = DepthOf(p.k, kb);
    for (int64_t jp = t.j0; jp < t.j1; ++jp) {
      const float* b = p.bp + (kb * p.panels + jp) * kBlockK * kNr;
      const int64_t cols = std::min(kNr, p.n - jp * kNr);
      for (int64_t ip = 0; ip < row_panels; ++ip) {
        const int64_t i = t.i0 + ip * kMr;
        const int64_t next = ip + 1 < row_panels ? i + kMr : t.i0;  // the row panel after it
        const float* block_a = p.a + kb * kBlockK * p.k_stride;
        MicroTile(depth, block_a + i * p.row_stride, p.row_stride, p.k_stride,
                  block_a + next * p.row_stride, b, p.alpha, kb == 0 ? p.beta : 1.0f,
                  p.c + i * p.ldc + jp * kNr, p.ldc,
                  static_cast<int>(std::min<int64_t>(kMr, t.i1 - i)), cols);
      }
    }
  }
}

// C = beta * C over a tile when k is 0 (an empty sum).
void ScaleTile(const Product& p, const GemmTileRange& t) {
  for (int64_t i = t.i0; i < t.i1; ++i) {
    float* row = p.c + i * p.ldc;
    for (int64_t j = t.j0 * kNr; j < std::min(p.n, t.j1 * kNr); ++j) {
      row[j] = p.beta == 0.0f ? 0.0f : p.beta * row[j];
    }
  }
}

// F32Gemm over all of op(B) packed at once (n is one packed group's columns).
void GemmPackedGroup(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                     const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                     float* c, int64_t ldc, absl::FunctionRef<void(const GemmTile&)> epilogue) {
  const OperandB op_b{b, trans_b ? 1 : ldb, trans_b ? ldb : 1, n, k};
  const int64_t panels = (n + kNr - 1) / kNr;
  const int64_t k_blocks = (k + kBlockK - 1) / kBlockK;
  // B packed once for every tile (at most kMaxPackedBBytes; the calling thread's buffer).
  thread_local GemmScratch<float> packed;
  float* bp = packed.GrownTo(k_blocks * panels * kBlockK * kNr);
  ParallelFor(k_blocks * panels, 1, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t kb = t / panels;
      PackPanel(op_b, (t % panels) * kNr, kb * kBlockK, DepthOf(k, kb), bp + t * kBlockK * kNr);
    }
  });
  const Product p{a,  trans_a ? 1 : lda, trans_a ? lda : 1, m, n, k, bp, panels, alpha, beta,
                  c, ldc};
  const int64_t rows_per_block = trans_a ? kRowsPerBlockKMajorA : kRowsPerBlockRowMajorA;
  ForEachGemmTile(m, panels, rows_per_block, kMaxPanelsPerTile, [&](const GemmTileRange& t) {
    if (k == 0) {
      ScaleTile(p, t);
    } else {
      ComputeTile(p, t);
    }
    const int64_t col = t.j0 * kNr;
    epilogue({t.i0, col, t.i1 - t.i0, std::min(n, t.j1 * kNr) - col, c + t.i0 * ldc + col, ldc});
  });
}

}  // namespace

bool HasF32Gemm() { return __builtin_cpu_supports("avx512f"); }

void F32Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
             const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
             int64_t ldc, absl::FunctionRef<void(const GemmTile&)> epilogue) {
  if (m <= 0 || n <= 0) return;
  k = std::max<int64_t>(k, 0);
  const int64_t panel_bytes = (k + kBlockK - 1) / kBlockK * kBlockK * kNr * sizeof(float);
  ForEachPackedGroup(n, kNr, panel_bytes, epilogue,
                     [&](int64_t col, int64_t cols, absl::FunctionRef<void(const GemmTile&)> then) {
                       // op(B)'s column `col` is a row of stored B when trans_b.
                       GemmPackedGroup(trans_a, trans_b, m, cols, k, alpha, a, lda,
                                       b + (trans_b ? col * ldb : col), ldb, beta, c + col, ldc,
                                       then);
                     });
}

}  // namespace conveyor::cpu
