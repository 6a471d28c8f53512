// Pieces every AVX-512 kernel of the CPU backend shares (runtime/cpu/f32_gemm.cc,
// bf16_gemm.cc, attention_tiles.cc, bf16_convert.cc): the mask of a vector's first lanes,
// the store of a micro-tile's fp32 sums into C, and a 16 x 16 transpose in registers.
//
// The functions carry target("avx512f") and are always inlined, so each is compiled into
// its caller, whose own target attribute includes AVX-512 F; the tree itself builds for
// x86-64-v2, and only those callers, chosen at run time, use AVX-512 (bf16_gemm.cc says
// why target attributes rather than per-file flags).
#ifndef CONVEYOR_RUNTIME_CPU_AVX512_TILE_H_
#define CONVEYOR_RUNTIME_CPU_AVX512_TILE_H_

#include <immintrin.h>

#include <cstdint>

namespace conveyor::cpu {

#define CONVEYOR_AVX512_INLINE [[gnu::always_inline]] inline __attribute__((target("avx512f")))

// The first n of 16 lanes (none for n <= 0, all for n >= 16).
CONVEYOR_AVX512_INLINE __mmask16 FirstLanes(int64_t n) {
  return n >= 16 ? 0xffff : n <= 0 ? 0 : static_cast<__mmask16>((1u << n) - 1);
}

// c[r, 16 v + j] = alpha * acc[r][v][j] + beta * c[r, 16 v + j] for r < rows and
// 16 v + j < cols (row r of C at c + r * ldc), one multiply and one fused multiply-add per
// element. beta = 0 does not read C: it may hold anything, NaN included.
template <int kRows, int kVecs>
CONVEYOR_AVX512_INLINE void StoreMicroTile(const __m512 (&acc)[kRows][kVecs], float alpha,
                                           float beta, float* c, int64_t ldc, int rows,
                                           int64_t cols) {
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) {
    if (r >= rows) break;
#pragma GCC unroll 8
    for (int v = 0; v < kVecs; ++v) {
      const __mmask16 mask = FirstLanes(cols - 16 * v);
      float* out = c + r * ldc + 16 * v;
      __m512 sum = _mm512_mul_ps(va, acc[r][v]);
      if (beta != 0.0f) sum = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(mask, out), sum);
      _mm512_mask_storeu_ps(out, mask, sum);
    }
  }
}

// x[c] = column c of the 16 x 16 block whose row r is x[r]: unpacks and shuffles inside
// each 128-bit lane give u[4 i + j], whose lane L holds column 4 L + j of rows
// 4 i .. 4 i + 3; two rounds of 128-bit-lane shuffles then gather each column's four
// lanes (0x88 takes lanes 0 and 2 of each operand, 0xdd lanes 1 and 3).
// The shuffles' unused pass-through operand (_mm512_undefined_ps) reads as uninitialised
// to GCC 12 once this is inlined into a loop.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
CONVEYOR_AVX512_INLINE void Transpose16(__m512 (&x)[16]) {
  __m512 t[16], u[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(x[2 * i], x[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(x[2 * i], x[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {
    u[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    u[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xee);
    u[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    u[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xee);
  }
  for (int j = 0; j < 4; ++j) {
    const __m512 v = _mm512_shuffle_f32x4(u[j], u[4 + j], 0x88);
    const __m512 w = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0x88);
    const __m512 v2 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0xdd);
    const __m512 w2 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0xdd);
    x[j] = _mm512_shuffle_f32x4(v, w, 0x88);
    x[8 + j] = _mm512_shuffle_f32x4(v, w, 0xdd);
    x[4 + j] = _mm512_shuffle_f32x4(v2, w2, 0x88);
    x[12 + j] = _mm512_shuffle_f32x4(v2, w2, 0xdd);
  }
}
#pragma GCC diagnostic pop

}  // namespace conveyor::cpu

#endif  // CONVEYOR_RUNTIME_CPU_AVX512_TILE_H_
