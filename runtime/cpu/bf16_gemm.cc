#include "runtime/cpu/bf16_gemm.h"

#include <immintrin.h>

#include <algorithm>

#include "runtime/cpu/avx512_tile.h"
#include "runtime/cpu/thread_pool.h"

// Only the functions marked CONVEYOR_BF16_TARGET use AVX-512, through the target
// attribute rather than -mavx512bf16 on the whole file: a file compiled with it may emit
// AVX-512 code for the inline functions it instantiates (std::vector's, say), and the
// linker may keep that copy for the whole binary, which then fails on CPUs without it.
#define CONVEYOR_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

namespace conveyor::cpu {
namespace {

// The blocking of Goto and van de Geijn ("Anatomy of high-performance matrix
// multiplication", ACM TOMS 34(3), 2008): C is computed in kMr x kNr micro-tiles whose
// sums stay in 24 of the 32 zmm registers; B is packed once into panels of kNr columns,
// one kNr x (kBf16GemmBlockK / 2) pair panel (64 KiB, in L2) per block of k, and A into
// panels of kMr rows, a block of kRowsPerBlock rows (96 KiB) that stays in L2 while the
// panels of B pass. Each tile of C (a block of rows by a few panels) is one thread's: it
// adds every block of k into the tile's fp32 sums in L2 and hands them to the caller's
// epilogue there. Measured on Zen 4, blocks of 512 of k ran a few percent faster than
// blocks of 256 (fewer passes over C), none slower.
constexpr int kMr = 6;             // rows of a micro-tile
constexpr int kNv = 4;             // zmm vectors (16 fp32 columns each) per row
constexpr int64_t kNr = 16 * kNv;  // columns of a micro-tile
constexpr int64_t kRowsPerBlock = kMr * 16;

// A matrix read as [rows, k] (op(A), or op(B) transposed): element (r, kk) is
// p[kk * ld + r] when the matrix is stored with k as its slow index, else p[r * ld + kk].
struct Operand {
  const uint16_t* p;
  int64_t ld;
  bool k_major;
  int64_t rows;
  int64_t k;
};

// The first n of 32 lanes, as a mask (avx512_tile.h's FirstLanes: of 16).
CONVEYOR_BF16_TARGET __mmask32 FirstLanes32(int64_t n) {
  return n >= 32 ? 0xffffffffu : n <= 0 ? 0 : static_cast<__mmask32>((1u << n) - 1);
}

// vpermt2w indices interleaving two vectors of 32 bf16 values: lanes [16 h, 16 h + 16)
// of the first (lo) and the second (hi) as 16 (lo, hi) pairs.
struct InterleaveTable {
  alignas(64) uint16_t index[2][32];
};
constexpr InterleaveTable MakeInterleaveTable() {
  InterleaveTable t{};
  for (int h = 0; h < 2; ++h) {
    for (int e = 0; e < 32; ++e)
      t.index[h][e] = static_cast<uint16_t>((e % 2) * 32 + 16 * h + e / 2);
  }
  return t;
}
constexpr InterleaveTable kInterleave = MakeInterleaveTable();

// The packing below for a matrix stored with k as its slow index: the pair (r, 2p),
// (r, 2p + 1) comes from two stored rows, interleaved 32 values at a time.
CONVEYOR_BF16_TARGET void PackKMajor(const Operand& x, int64_t r0, int64_t width, int64_t p0,
                                     int64_t pairs, uint32_t* out) {
  const int64_t rows = std::min(width, x.rows - r0);
  const __m512i index[2] = {_mm512_load_si512(kInterleave.index[0]),
                            _mm512_load_si512(kInterleave.index[1])};
  for (int64_t p = 0; p < pairs; ++p) {
    const int64_t kk = 2 * (p0 + p);
    const uint16_t* lo = x.p + kk * x.ld + r0;
    const bool whole = kk + 1 < x.k;
    __m512i a = _mm512_setzero_si512(), b = _mm512_setzero_si512();
    for (int64_t g = 0; 16 * g < width; ++g) {  // 16 pairs per group
      if (g % 2 == 0) {                         // masked loads: nothing is read past the rows
        const __mmask32 mask = FirstLanes32(rows - 16 * g);
        a = _mm512_maskz_loadu_epi16(mask, lo + 16 * g);
        if (whole) b = _mm512_maskz_loadu_epi16(mask, lo + x.ld + 16 * g);
      }
      _mm512_mask_storeu_epi32(out + p * width + 16 * g, FirstLanes(width - 16 * g),
                               _mm512_permutex2var_epi16(a, index[g % 2], b));
    }
  }
}

// The same for a matrix stored with k as its fast index: a pair is one 32-bit word of a
// stored row, 16 rows' words gathered at a time; a last half pair (odd k) is read alone.
CONVEYOR_BF16_TARGET void PackPairMajor(const Operand& x, int64_t r0, int64_t width, int64_t p0,
                                        int64_t pairs, uint32_t* out) {
  const int64_t rows = std::min(width, x.rows - r0);
  const int64_t whole_pairs = std::min(pairs, x.k / 2 - p0);
  const __m512i row_bytes =
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(static_cast<int>(2 * x.ld)));
  for (int64_t g = 0; 16 * g < width; ++g) {
    const __mmask16 load = FirstLanes(rows - 16 * g), store = FirstLanes(width - 16 * g);
    const uint16_t* first = x.p + (r0 + 16 * g) * x.ld + 2 * p0;
    for (int64_t p = 0; p < whole_pairs; ++p) {
      const __m512i words =
          _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), load, row_bytes, first + 2 * p, 1);
      _mm512_mask_storeu_epi32(out + p * width + 16 * g, store, words);
    }
  }
  for (int64_t p = std::max<int64_t>(whole_pairs, 0); p < pairs; ++p) {  // past k: zeros
    const int64_t kk = 2 * (p0 + p);
    for (int64_t r = 0; r < width; ++r) {
      out[p * width + r] = r < rows && kk < x.k ? x.p[(r0 + r) * x.ld + kk] : 0u;
    }
  }
}

// Packs rows [r0, r0 + width) and pairs [p0, p0 + pairs) of `x` as vdpbf16ps reads them:
// out[p * width + r] holds (element (r, 2p) in the low half, element (r, 2p + 1) in the
// high half), zero past the matrix's rows or k (zero products add nothing).
CONVEYOR_BF16_TARGET void PackPanel(const Operand& x, int64_t r0, int64_t width, int64_t p0,
                                    int64_t pairs, uint32_t* out) {
  if (x.k_major) {
    PackKMajor(x, r0, width, p0, pairs, out);
  } else {
    PackPairMajor(x, r0, width, p0, pairs, out);
  }
}

// c[0:rows, 0:cols] = alpha * sum + beta * c over one micro-tile: `pairs` steps, each a
// broadcast of row r's pair of A against kNv vectors of B's pairs, 16 columns each.
CONVEYOR_BF16_TARGET void MicroTile(int64_t pairs, const uint32_t* ap, const uint32_t* bp,
                                    float alpha, float beta, float* c, int64_t ldc, int rows,
                                    int64_t cols) {
  __m512 acc[kMr][kNv];
#pragma GCC unroll 8
  for (int r = 0; r < kMr; ++r) {
#pragma GCC unroll 8
    for (int v = 0; v < kNv; ++v) acc[r][v] = _mm512_setzero_ps();
  }
  for (int64_t p = 0; p < pairs; ++p, ap += kMr, bp += kNr) {
    __m512bh bv[kNv];
#pragma GCC unroll 8
    for (int v = 0; v < kNv; ++v) bv[v] = (__m512bh)_mm512_loadu_si512(bp + 16 * v);
#pragma GCC unroll 8
    for (int r = 0; r < kMr; ++r) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(ap[r]));
#pragma GCC unroll 8
      for (int v = 0; v < kNv; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], av, bv[v]);
    }
  }
  StoreMicroTile(acc, alpha, beta, c, ldc, rows, cols);
}

constexpr int64_t kBlockPairs = kBf16GemmBlockK / 2;
// Columns of C per tile: a tile's fp32 sums (kRowsPerBlock x 512, 192 KiB) stay in L2
// with its rows of A (96 KiB) and one panel of B while the blocks of k pass.
constexpr int64_t kPanelsPerTile = 8;

// The pairs of block kb of k.
int64_t PairsIn(int64_t k, int64_t kb) {
  return (std::min(kBf16GemmBlockK, k - kb * kBf16GemmBlockK) + 1) / 2;
}

// The product with op(B) packed whole: panel jp of block kb of k at bp + (kb * panels +
// jp) * kBlockPairs * kNr.
struct Product {
  Operand a;
  const uint32_t* bp;
  int64_t panels, k_blocks, n;
  float alpha;
};

// sums = alpha * the product over rows [i0, i1) and panels [j0, j1) (sums[0] at (i0,
// j0 * kNr)): each block of k adds its partial sums into the tile, A's rows packed once
// per block.
CONVEYOR_BF16_TARGET void ComputeTile(const Product& p, int64_t i0, int64_t i1, int64_t j0,
                                      int64_t j1, float* sums, int64_t ld) {
  thread_local GemmScratch<uint32_t> ap;
  const int64_t row_panels = (i1 - i0 + kMr - 1) / kMr;
  uint32_t* packed_a = ap.GrownTo(row_panels * kBlockPairs * kMr);
  for (int64_t kb = 0; kb < p.k_blocks; ++kb) {
    const int64_t pairs = PairsIn(p.a.k, kb);
    for (int64_t ip = 0; ip < row_panels; ++ip) {
      PackPanel(p.a, i0 + ip * kMr, kMr, kb * kBlockPairs, pairs, packed_a + ip * pairs * kMr);
    }
    for (int64_t jp = j0; jp < j1; ++jp) {
      const uint32_t* b = p.bp + (kb * p.panels + jp) * kBlockPairs * kNr;
      const int64_t cols = std::min(kNr, p.n - jp * kNr);
      for (int64_t ip = 0; ip < row_panels; ++ip) {
        MicroTile(pairs, packed_a + ip * pairs * kMr, b, p.alpha, kb == 0 ? 0.0f : 1.0f,
                  sums + ip * kMr * ld + (jp - j0) * kNr, ld,
                  static_cast<int>(std::min<int64_t>(kMr, i1 - i0 - ip * kMr)), cols);
      }
    }
  }
}

// c = sums + beta * c over one tile, the sum fused (one rounding, as a GEMM's beta);
// beta = 0 does not read c (it may hold anything, NaN included).
CONVEYOR_BF16_TARGET void StoreTile(const GemmTile& t, float beta, float* c, int64_t ldc) {
  const __m512 vb = _mm512_set1_ps(beta);
  for (int64_t i = 0; i < t.rows; ++i) {
    const float* s = t.values + i * t.ld;
    float* out = c + (t.row + i) * ldc + t.col;
    for (int64_t j = 0; j < t.cols; j += 16) {
      const __mmask16 mask = FirstLanes(t.cols - j);
      __m512 v = _mm512_maskz_loadu_ps(mask, s + j);
      if (beta != 0.0f) v = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(mask, out + j), v);
      _mm512_mask_storeu_ps(out + j, mask, v);
    }
  }
}

}  // namespace

bool HasBf16Gemm() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16");
}

void Bf16Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
              const BFloat16* a, int64_t lda, const BFloat16* b, int64_t ldb, float beta, float* c,
              int64_t ldc) {
  GemmTiles(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb,
                [&](const GemmTile& tile) { StoreTile(tile, beta, c, ldc); });
}

namespace {

// GemmTiles over all of op(B) packed at once (n is one packed group's columns).
void GemmPackedGroup(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                     const BFloat16* a, int64_t lda, const BFloat16* b, int64_t ldb,
                     absl::FunctionRef<void(const GemmTile&)> epilogue) {
  const auto* a_bits = reinterpret_cast<const uint16_t*>(a);
  const auto* b_bits = reinterpret_cast<const uint16_t*>(b);
  const Operand op_b{b_bits, ldb, !trans_b, n, std::max<int64_t>(k, 0)};  // op(B)^T: [n, k]
  const int64_t panels = (n + kNr - 1) / kNr;
  const int64_t k_blocks = k > 0 ? (k + kBf16GemmBlockK - 1) / kBf16GemmBlockK : 0;
  // B packed once for every tile (at most kMaxPackedBBytes; the calling thread's buffer).
  thread_local GemmScratch<uint32_t> bp;
  uint32_t* packed_b = bp.GrownTo(k_blocks * panels * kBlockPairs * kNr);
  ParallelFor(k_blocks * panels, 1, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      PackPanel(op_b, (t % panels) * kNr, kNr, (t / panels) * kBlockPairs,
                PairsIn(k, t / panels), packed_b + t * kBlockPairs * kNr);
    }
  });
  const Product product{{a_bits, lda, trans_a, m, k}, packed_b, panels, k_blocks, n, alpha};
  ForEachGemmTile(m, panels, kRowsPerBlock, kPanelsPerTile, [&](const GemmTileRange& t) {
    thread_local GemmScratch<float> sums;
    const int64_t ld = (t.j1 - t.j0) * kNr;
    float* tile_sums = sums.GrownTo(kRowsPerBlock * ld);
    if (k_blocks == 0) std::fill_n(tile_sums, kRowsPerBlock * ld, 0.0f);  // an empty sum
    ComputeTile(product, t.i0, t.i1, t.j0, t.j1, tile_sums, ld);
    epilogue({t.i0, t.j0 * kNr, t.i1 - t.i0, std::min(n, t.j1 * kNr) - t.j0 * kNr, tile_sums, ld});
  });
}

}  // namespace

void GemmTiles(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
               const BFloat16* a, int64_t lda, const BFloat16* b, int64_t ldb,
               absl::FunctionRef<void(const GemmTile&)> epilogue) {
  if (m <= 0 || n <= 0) return;
  const int64_t k_blocks = k > 0 ? (k + kBf16GemmBlockK - 1) / kBf16GemmBlockK : 0;
  const int64_t panel_bytes = k_blocks * kBlockPairs * kNr * sizeof(uint32_t);
  ForEachPackedGroup(n, kNr, panel_bytes, epilogue,
                     [&](int64_t col, int64_t cols, absl::FunctionRef<void(const GemmTile&)> then) {
                       // op(B)'s column `col` is a row of stored B when trans_b.
                       GemmPackedGroup(trans_a, trans_b, m, cols, k, alpha, a, lda,
                                       b + (trans_b ? col * ldb : col), ldb, then);
                     });
}

}  // namespace conveyor::cpu
