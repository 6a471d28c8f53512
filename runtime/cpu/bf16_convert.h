// bf16 <-> fp32 over arrays with AVX-512, 16 values per instruction: the --bf16 CPU
// backend's ops (runtime/cpu/cpu_bf16_ops.h) widen their bf16 inputs a few rows at a
// time into a cache-sized fp32 buffer and round their results back, where a scalar loop
// over runtime/dtype.h's conversions would take as long as the op's own arithmetic.
//
// Bit for bit runtime/dtype.h's ToFloat and ToBFloat16: widening appends 16 zero bits;
// rounding is to nearest even on the bits (add 0x7fff plus the kept part's lowest bit,
// keep the high half), a NaN kept a NaN by setting its quiet bit. Not the CPU's
// vcvtneps2bf16, which flushes subnormal inputs to zero (Intel SDM, VCVTNEPS2BF16).
#ifndef CONVEYOR_RUNTIME_CPU_BF16_CONVERT_H_
#define CONVEYOR_RUNTIME_CPU_BF16_CONVERT_H_

#include <cstdint>

#include "runtime/dtype.h"

namespace conveyor::cpu {

// out[i] = ToFloat(in[i]) for i < n. Needs HasBf16Gemm()'s AVX-512 (bf16_gemm.h).
void WidenBf16(const BFloat16* in, int64_t n, float* out);
// out[i] = ToBFloat16(in[i]) for i < n. Needs HasBf16Gemm()'s AVX-512.
void RoundToBf16(const float* in, int64_t n, BFloat16* out);

}  // namespace conveyor::cpu

#endif  // CONVEYOR_RUNTIME_CPU_BF16_CONVERT_H_
