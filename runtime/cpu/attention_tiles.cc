#include "runtime/cpu/attention_tiles.h"

#include <cblas.h>
#include <immintrin.h>

#include <algorithm>
#include <cassert>

#include "runtime/cpu/avx512_tile.h"

// Only the functions marked CONVEYOR_AVX512_TARGET use AVX-512, through the target
// attribute rather than -mavx512f on the whole file, for the reason bf16_gemm.cc gives:
// a file compiled with it may emit AVX-512 copies of inline functions the linker then
// keeps for the whole binary.
#define CONVEYOR_AVX512_TARGET __attribute__((target("avx512f")))

namespace conveyor::cpu {
namespace {

// A micro-tile of C is kMaxRows rows by up to kMaxVecs vectors of 16 columns: 24 sums
// in zmm registers, 4 for a row of B and 1 for the broadcast element of A, of the 32.
// Each step of k loads one row of B (kMaxVecs vectors) and kMaxRows elements of A for
// 24 FMAs, so the loads stay under the FMA rate (Goto and van de Geijn, "Anatomy of
// high-performance matrix multiplication", ACM TOMS 34(3), 2008, without the packing:
// B's rows here are at most a few KiB and stay in L1/L2 across the row blocks).
constexpr int kMaxRows = 6;
constexpr int kMaxVecs = 4;
constexpr int64_t kChunk = 16 * kMaxVecs;  // columns per pass over the rows

// C[row, row + kRows) x [col, col + 16 kVecs) of the product, the last vector's columns
// masked by `last` (columns past n are neither read nor written).
template <int kRows, int kVecs>
CONVEYOR_AVX512_TARGET void MicroTile(const TileProduct& p, int64_t row, int64_t col,
                                      __mmask16 last) {
  __m512 acc[kRows][kVecs];
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < kVecs; ++v) acc[r][v] = _mm512_setzero_ps();
  }
  const float* a = p.a + row * p.a_row_stride;
  const float* b = p.b + col;
  for (int64_t kk = 0; kk < p.k; ++kk, a += p.a_col_stride, b += p.ldb) {
    __m512 bv[kVecs];
#pragma GCC unroll 4
    for (int v = 0; v < kVecs; ++v) {
      bv[v] = v + 1 < kVecs ? _mm512_loadu_ps(b + 16 * v) : _mm512_maskz_loadu_ps(last, b + 16 * v);
    }
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) {
      const __m512 av = _mm512_set1_ps(a[r * p.a_row_stride]);
#pragma GCC unroll 4
      for (int v = 0; v < kVecs; ++v) acc[r][v] = _mm512_fmadd_ps(av, bv[v], acc[r][v]);
    }
  }
  const __m512 alpha = _mm512_set1_ps(p.alpha);
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) {
    float* c = p.c + (row + r) * p.ldc + col;
#pragma GCC unroll 4
    for (int v = 0; v < kVecs; ++v) {
      const __mmask16 mask = v + 1 < kVecs ? 0xffff : last;
      const __m512 old =
          p.accumulate ? _mm512_maskz_loadu_ps(mask, c + 16 * v) : _mm512_setzero_ps();
      _mm512_mask_storeu_ps(c + 16 * v, mask, _mm512_fmadd_ps(alpha, acc[r][v], old));
    }
  }
}

template <int kRows>
CONVEYOR_AVX512_TARGET void MicroTileOfWidth(int vecs, const TileProduct& p, int64_t row,
                                             int64_t col, __mmask16 last) {
  switch (vecs) {
    case 1:
      return MicroTile<kRows, 1>(p, row, col, last);
    case 2:
      return MicroTile<kRows, 2>(p, row, col, last);
    case 3:
      return MicroTile<kRows, 3>(p, row, col, last);
    default:
      return MicroTile<kRows, 4>(p, row, col, last);
  }
}

// Column chunks of kChunk, each swept by row blocks of at most kMaxRows (the chunk of B
// is read once per row block, from cache). The blocks share the rows evenly (32 rows:
// four of 5 and two of 6, not five of 6 and one of 2): a block of few rows loads a row
// of B for few FMAs.
CONVEYOR_AVX512_TARGET void TileGemmAvx512(const TileProduct& p) {
  const int64_t blocks = (p.m + kMaxRows - 1) / kMaxRows;
  for (int64_t col = 0; col < p.n; col += kChunk) {
    const int64_t width = std::min(kChunk, p.n - col);
    const int vecs = static_cast<int>((width + 15) / 16);
    const __mmask16 last = FirstLanes(width - 16 * (vecs - 1));
    for (int64_t block = 0; block < blocks; ++block) {
      const int64_t row = p.m * block / blocks;
      switch (p.m * (block + 1) / blocks - row) {
        case 1:
          MicroTileOfWidth<1>(vecs, p, row, col, last);
          break;
        case 2:
          MicroTileOfWidth<2>(vecs, p, row, col, last);
          break;
        case 3:
          MicroTileOfWidth<3>(vecs, p, row, col, last);
          break;
        case 4:
          MicroTileOfWidth<4>(vecs, p, row, col, last);
          break;
        case 5:
          MicroTileOfWidth<5>(vecs, p, row, col, last);
          break;
        default:
          MicroTileOfWidth<6>(vecs, p, row, col, last);
          break;
      }
    }
  }
}

// 16 x 16 blocks through registers (Transpose16, avx512_tile.h): each line of `in` is
// read once (its rows lie ld apart, often a power of two, so reading a column at a time
// would evict them).
CONVEYOR_AVX512_TARGET void TransposeRowsAvx512(int64_t rows, int64_t cols, const float* in,
                                                int64_t ld, float* out, int64_t ld_out) {
  for (int64_t r0 = 0; r0 < rows; r0 += 16) {
    const __mmask16 row_mask = FirstLanes(rows - r0);
    for (int64_t c0 = 0; c0 < cols; c0 += 16) {
      const __mmask16 col_mask = FirstLanes(cols - c0);
      __m512 x[16];
      for (int r = 0; r < 16; ++r) {
        x[r] = r0 + r < rows ? _mm512_maskz_loadu_ps(col_mask, in + (r0 + r) * ld + c0)
                             : _mm512_setzero_ps();
        // The next block's row (rows ld apart, which the hardware's prefetchers do not
        // follow across 16 rows): its line arrives while this block is transposed.
        if (r0 + 16 + r < rows) {
          _mm_prefetch(reinterpret_cast<const char*>(in + (r0 + 16 + r) * ld + c0), _MM_HINT_T0);
        }
      }
      Transpose16(x);
      for (int c = 0; c < 16 && c0 + c < cols; ++c) {
        _mm512_mask_storeu_ps(out + (c0 + c) * ld_out + r0, row_mask, x[c]);
      }
    }
  }
}

void TileGemmBlas(const TileProduct& p) {
  assert(p.a_col_stride == 1 || p.a_row_stride == 1);
  const bool trans_a = p.a_col_stride != 1;
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, CblasNoTrans, p.m, p.n, p.k,
              p.alpha, p.a, trans_a ? p.a_col_stride : p.a_row_stride, p.b, p.ldb,
              p.accumulate ? 1.0f : 0.0f, p.c, p.ldc);
}

}  // namespace

TileKernel BestTileKernel() {
  static const TileKernel best =
      __builtin_cpu_supports("avx512f") ? TileKernel::kAvx512 : TileKernel::kBlas;
  return best;
}

void TileGemm(TileKernel kernel, const TileProduct& p) {
  if (p.m <= 0 || p.n <= 0) return;
  if (kernel == TileKernel::kAvx512) {
    TileGemmAvx512(p);
  } else {
    TileGemmBlas(p);
  }
}

void TransposeRows(TileKernel kernel, int64_t rows, int64_t cols, const float* in, int64_t ld,
                   float* out, int64_t ld_out) {
  if (kernel == TileKernel::kAvx512) return TransposeRowsAvx512(rows, cols, in, ld, out, ld_out);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) out[c * ld_out + r] = in[r * ld + c];
  }
}

}  // namespace conveyor::cpu
