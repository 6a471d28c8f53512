#include "runtime/cpu/bf16_convert.h"

#include <immintrin.h>

#include "runtime/cpu/avx512_tile.h"

// AVX-512 through the target attribute only (see bf16_gemm.cc): the binary runs on any
// x86-64, and these functions are called only where the CPU has it.
#define CONVEYOR_AVX512_TARGET __attribute__((target("avx512f,avx512bw,avx512vl")))

namespace conveyor::cpu {

CONVEYOR_AVX512_TARGET void WidenBf16(const BFloat16* in, int64_t n, float* out) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 mask = FirstLanes(n - i);
    const __m256i bits = _mm256_maskz_loadu_epi16(mask, in + i);
    const __m512i wide = _mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16);
    _mm512_mask_storeu_ps(out + i, mask, _mm512_castsi512_ps(wide));
  }
}

CONVEYOR_AVX512_TARGET void RoundToBf16(const float* in, int64_t n, BFloat16* out) {
  const __m512i rounding = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1);
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), infinity = _mm512_set1_epi32(0x7f800000);
  const __m512i quiet = _mm512_set1_epi32(0x0040);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 mask = FirstLanes(n - i);
    const __m512i u = _mm512_castps_si512(_mm512_maskz_loadu_ps(mask, in + i));
    const __m512i high = _mm512_srli_epi32(u, 16);
    const __m512i bias = _mm512_add_epi32(rounding, _mm512_and_si512(high, one));
    __m512i bits = _mm512_srli_epi32(_mm512_add_epi32(u, bias), 16);
    // NaN: |u| above infinity's bits.
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, abs_mask), infinity);
    bits = _mm512_mask_mov_epi32(bits, nan, _mm512_or_si512(high, quiet));
    _mm256_mask_storeu_epi16(out + i, mask, _mm512_cvtepi32_epi16(bits));
  }
}

}  // namespace conveyor::cpu
