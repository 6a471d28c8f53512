// Row-major GEMMs through cuBLASLt: c = alpha op(a) op(b) + beta c.
//
// cuBLASLt is column-major. A row-major [r, c] matrix is the column-major [c, r] matrix
// with the same bytes, so the row-major product C = op(A) op(B) is computed as the
// column-major C^T = op(B)^T op(A)^T: cuBLASLt's "A" is our b, its "B" is our a, and its
// output is [n, m] with leading dimension n.
//
// Types: a and b fp32 or bf16 (the same), c fp32 or the type of a and b; the compute
// type is always CUBLAS_COMPUTE_32F (fp32 accumulation, and real fp32 products, never
// TF32, when the inputs are fp32, so the fp32 path compares tightly with the CPU).
//
// A plan (matmul and layout descriptors plus the heuristic's algorithm) is cached per
// (shape, transposes, dtypes, pointer alignments): a steady-state training step runs no
// heuristic query. The 32 MiB workspace is allocated once. Not thread-safe across
// concurrent callers of one instance beyond the mutex-protected cache (one per rank).
#ifndef CONVEYOR_RUNTIME_CUDA_GEMM_LT_H_
#define CONVEYOR_RUNTIME_CUDA_GEMM_LT_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "runtime/dtype.h"

namespace conveyor::cuda {

class GemmLt {
 public:
  static constexpr int64_t kWorkspaceBytes = int64_t{32} << 20;

  GemmLt();  // creates the cuBLASLt handle and the workspace (needs a device)
  ~GemmLt();
  GemmLt(const GemmLt&) = delete;
  GemmLt& operator=(const GemmLt&) = delete;

  // Enqueues c[m, n] = alpha op(a)[m, k] op(b)[k, n] + beta c on stream 0; trans_a says a
  // is stored [k, m], trans_b that b is stored [n, k]. Device pointers.
  void Run(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const void* a,
           const void* b, DType ab_dtype, float beta, void* c, DType c_dtype);

  // How many heuristic queries have run (one per distinct plan key); for tests.
  int64_t heuristic_queries() const;

 private:
  struct Plan;
  // (m, n, k, trans_a, trans_b, ab dtype, c dtype, alignment of a, b, c).
  using Key = std::tuple<int64_t, int64_t, int64_t, bool, bool, int, int, int, int, int>;

  const Plan& PlanFor(const Key& key);

  void* handle_ = nullptr;  // cublasLtHandle_t
  void* workspace_ = nullptr;
  mutable std::mutex mu_;
  std::map<Key, std::unique_ptr<Plan>> plans_;
  int64_t heuristic_queries_ = 0;
};

}  // namespace conveyor::cuda

#endif  // CONVEYOR_RUNTIME_CUDA_GEMM_LT_H_
