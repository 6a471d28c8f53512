// C = alpha * op(A) * op(B) + beta * C for row-major fp32 matrices: Conveyor's AVX-512
// kernel (f32_gemm.h) where the CPU has AVX-512, OpenBLAS elsewhere and for the small
// strided products.
#ifndef CONVEYOR_RUNTIME_CPU_GEMM_H_
#define CONVEYOR_RUNTIME_CPU_GEMM_H_

#include <cstdint>

#include "absl/functional/function_ref.h"
#include "runtime/cpu/gemm_tiles.h"

namespace conveyor::cpu {

// op(A) is [m, k], op(B) is [k, n], C is [m, n]. trans_a / trans_b say that A / B are
// stored transposed ([k, m] / [n, k]); leading dimensions are the stored row lengths.
void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          const float* b, float beta, float* c);

// Same, then `epilogue` over C's tiles, each once, on the pool's threads: the AVX-512
// kernel's tiles while each is in L2, or bands of whole rows after OpenBLAS's product.
void GemmThen(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
              const float* a, const float* b, float beta, float* c,
              absl::FunctionRef<void(const GemmTile&)> epilogue);

// Through OpenBLAS, with explicit leading dimensions, for sub-matrices (one head inside
// a row).
void GemmStrided(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                 const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                 int64_t ldc);

// Whether Gemm and GemmThen use the AVX-512 kernel (the default where the CPU has AVX-512)
// or OpenBLAS: for tests and benchmarks that compare the two. Not to be called while an
// op runs.
void UsePackedF32Gemm(bool on);

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
