// C = alpha * op(A) op(B) + beta * C with bf16 A and B and fp32 C, multiplied by the
// CPU's AVX-512 BF16 dot-product instruction (vdpbf16ps; Intel since Cooper Lake, AMD
// since Zen 4). This is the CPU's --bf16 GEMM (runtime/cpu/cpu_bf16_ops.h): on a GPU,
// cuBLASLt multiplies bf16 tensors with fp32 accumulation the same way.
//
// The math. A and B hold bf16 values already (the caller rounded them: activations when
// they were written, weight copies from the fp32 master weights). A product of two bf16
// values (8 significant bits each) has at most 16 significant bits, so it is exact in
// fp32 (24); vdpbf16ps adds two such products to an fp32 accumulator, rounding to nearest
// even after each addition, so every sum over k is an fp32 sum of exact products:
//   |computed - exact| <= gamma(d) * sum_k |a_ik b_kj|,  gamma(d) = d u / (1 - d u),
// u = 2^-24, with d the number of additions on the longest path (at most k, plus one per
// block of kBf16GemmBlockK of k, below, plus the alpha product and the beta sum) (Higham,
// "Accuracy and Stability of Numerical Algorithms", 2nd ed., §3.1). Unlike fp32 arithmetic, the
// instruction treats bf16 subnormal inputs and fp32 subnormal results as zero (Intel SDM,
// VDPBF16PS: DAZ and FTZ regardless of MXCSR); bf16 training values do not live there.
#ifndef CONVEYOR_RUNTIME_CPU_BF16_GEMM_H_
#define CONVEYOR_RUNTIME_CPU_BF16_GEMM_H_

#include <cstdint>

#include "absl/functional/function_ref.h"
#include "runtime/cpu/gemm_tiles.h"

#include "runtime/dtype.h"

namespace conveyor::cpu {

// Whether this CPU has the instructions Bf16Gemm needs (AVX-512 F, BW, VL and BF16). The
// binary is built for any x86-64: only Bf16Gemm's kernels use them, chosen at run time.
bool HasBf16Gemm();

// op(A) is [m, k], op(B) is [k, n], C is [m, n], all row-major; trans_a / trans_b say
// that A / B are stored transposed ([k, m] / [n, k]); lda, ldb, ldc are the stored row
// lengths. C is not read when beta is 0. Runs on the CPU thread pool (thread_pool.h).
// Needs HasBf16Gemm().
void Bf16Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
              const BFloat16* a, int64_t lda, const BFloat16* b, int64_t ldb, float beta, float* c,
              int64_t ldc);

// The same product handed tile by tile to `epilogue` (on the pool's threads, each tile
// once, while its fp32 sums are in the thread's L2: GemmTile::values, a buffer of the
// thread's) instead of stored: the caller writes its output from the sums (a bias, an
// activation, one rounding to bf16) in the same pass, with no [m, n] fp32 copy. The sums
// err as Bf16Gemm's with beta = 0.
void GemmTiles(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                   const BFloat16* a, int64_t lda, const BFloat16* b, int64_t ldb,
                   absl::FunctionRef<void(const GemmTile&)> epilogue);

// The depth of one block of k: each element of C takes one more fp32 addition per block
// (the partial sums are added into C), which the error bound above counts.
inline constexpr int64_t kBf16GemmBlockK = 512;

}  // namespace conveyor::cpu

#endif  // CONVEYOR_RUNTIME_CPU_BF16_GEMM_H_
