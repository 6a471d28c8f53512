#include "runtime/cpu/gemm.h"

#include <cblas.h>

#include <algorithm>
#include <atomic>

#include "runtime/cpu/f32_gemm.h"
#include "runtime/cpu/thread_pool.h"

namespace conveyor::cpu {

void GemmStrided(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                 const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                 int64_t ldc) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

namespace {

// Whether GEMMs go through the AVX-512 kernel: the CPU's answer unless a test said no.
std::atomic<bool>& PackedKernel() {
  static std::atomic<bool> on{HasF32Gemm()};
  return on;
}

}  // namespace

void UsePackedF32Gemm(bool on) { PackedKernel() = on && HasF32Gemm(); }

void GemmThen(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
              const float* a, const float* b, float beta, float* c,
              absl::FunctionRef<void(const GemmTile&)> epilogue) {
  const int64_t lda = trans_a ? m : k, ldb = trans_b ? k : n;
  if (PackedKernel()) {
    F32Gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, n, epilogue);
    return;
  }
  GemmStrided(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, n);
  // Bands of about 64 KB of C per task.
  ParallelFor(m, std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(n, 1)),
              [&](int64_t begin, int64_t end) {
                epilogue({begin, 0, end - begin, n, c + begin * n, n});
              });
}

void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          const float* b, float beta, float* c) {
  const int64_t lda = trans_a ? m : k, ldb = trans_b ? k : n;
  if (PackedKernel()) {
    F32Gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, n);
  } else {
    GemmStrided(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, n);
  }
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
