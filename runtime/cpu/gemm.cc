#include "runtime/cpu/gemm.h"

#include <cblas.h>

#include "runtime/cpu/thread_pool.h"

namespace conveyor::cpu {

void GemmStrided(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                 const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                 int64_t ldc) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          const float* b, float beta, float* c) {
  GemmStrided(trans_a, trans_b, m, n, k, alpha, a, trans_a ? m : k, b, trans_b ? k : n, beta, c, n);
}

void ParallelForSerialGemm(int64_t n, absl::FunctionRef<void(int64_t, int64_t)> fn) {
  const int blas_threads = openblas_get_num_threads();
  openblas_set_num_threads(1);
  ParallelFor(n, /*grain=*/1, fn);
  openblas_set_num_threads(blas_threads);
}

void SetCpuThreads(int threads) {
  openblas_set_num_threads(threads);
  SetPoolThreads(threads);
}

}  // namespace conveyor::cpu
