// C = alpha * op(A) op(B) + beta * C in fp32 on CPUs with AVX-512, Conveyor's own packed
// kernel (runtime/cpu/gemm_tiles.h): the CPU backend's GEMM where the CPU has AVX-512
// (runtime/cpu/gemm.h picks it), OpenBLAS's elsewhere.
//
// Why not OpenBLAS alone: measured on a Zen 4 (docs/benchmarks.md), on warm operands it
// ran the output layer's shapes 5-25% faster than OpenBLAS and the linear layers' within a
// few percent either way; inside the training step, where operands arrive cold, about
// level. What it brings besides: it hands each finished tile of C to the caller while the
// tile is in L2, so a linear layer's bias, GELU or GELU's derivative is applied there
// instead of in a second pass over C in memory; and a step on it calls no OpenBLAS, whose
// idle threads spin after each call on the CPUs the pool's threads need.
//
// The math: each element of C is an fp32 sum over k in order, one fused multiply-add per
// term, in blocks of kF32GemmBlockK whose partial sums are added into C in order; alpha
// scales each block's sum, and beta multiplies C once, before the first block. So
//   |computed - exact| <= gamma(d) * (|alpha| sum_k |a_ik b_kj| + |beta c_ij|),
// gamma(d) = d u / (1 - d u), u = 2^-24, d = k + 2 * ceil(k / kF32GemmBlockK) (Higham,
// "Accuracy and Stability of Numerical Algorithms", 2nd ed., §3.1), and the order does
// not depend on the number of threads.
#ifndef CONVEYOR_RUNTIME_CPU_F32_GEMM_H_
#define CONVEYOR_RUNTIME_CPU_F32_GEMM_H_

#include <cstdint>

#include "absl/functional/function_ref.h"
#include "runtime/cpu/gemm_tiles.h"

namespace conveyor::cpu {

// Whether this CPU has what F32Gemm needs (AVX-512 F). The binary is built for any
// x86-64; only the kernel's functions use AVX-512, chosen at run time.
bool HasF32Gemm();

// op(A) is [m, k], op(B) is [k, n], C is [m, n], all row-major; trans_a / trans_b say
// that A / B are stored transposed ([k, m] / [n, k]); lda, ldb, ldc are the stored row
// lengths. C is not read when beta is 0. When `epilogue` is given, it is called once for
// each finished tile of C (GemmTile::values points into C), on the thread that computed
// it. Runs on the CPU thread pool (thread_pool.h). Needs HasF32Gemm().
void F32Gemm(
    bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
    int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc,
    absl::FunctionRef<void(const GemmTile&)> epilogue = [](const GemmTile&) {});

// The depth of one block of k (the error bound above counts one addition per block).
inline constexpr int64_t kF32GemmBlockK = 256;

}  // namespace conveyor::cpu

#endif  // CONVEYOR_RUNTIME_CPU_F32_GEMM_H_
