// C = alpha * op(A) * op(B) + beta * C for row-major fp32 matrices, through OpenBLAS.
#ifndef CONVEYOR_RUNTIME_CPU_GEMM_H_
#define CONVEYOR_RUNTIME_CPU_GEMM_H_

#include <cstdint>

#include "absl/functional/function_ref.h"

namespace conveyor::cpu {

// op(A) is [m, k], op(B) is [k, n], C is [m, n]. trans_a / trans_b say that A / B are
// stored transposed ([k, m] / [n, k]); leading dimensions are the stored row lengths.
void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          const float* b, float beta, float* c);

// Same, with explicit leading dimensions, for sub-matrices (one head inside a row).
void GemmStrided(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                 const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                 int64_t ldc);

// ParallelFor(n, 1, fn) (thread_pool.h) with OpenBLAS single-threaded meanwhile: for many
// small independent products (attention's per-head tiles), each computed whole by one
// pool thread; OpenBLAS's own threads on top would oversubscribe the CPUs. OpenBLAS
// splits a product's rows and columns, never its sum, so the results are the same.
void ParallelForSerialGemm(int64_t n, absl::FunctionRef<void(int64_t, int64_t)> fn);

// The threads the CPU ops use: OpenBLAS's and the thread pool's (thread_pool.h) alike
// (ranks on one machine share the CPUs the process may use).
void SetCpuThreads(int threads);

}  // namespace conveyor::cpu

#endif  // CONVEYOR_RUNTIME_CPU_GEMM_H_
