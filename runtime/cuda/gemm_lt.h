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
// Epilogues fold a linear layer's elementwise work into the GEMM (one pass over the
// output instead of two or three, or none over dy): kBias adds a vector to every row of
// c; kGeluAux and kBiasGeluAux (the bias, then) keep the pre-activation in `aux` and
// write GELU of it (tanh form) to c, and kGeluGradAux multiplies the product by GELU's
// derivative at `aux` (their backward); kBiasGradOfA also writes the sums of op(a) over
// k, a bias gradient, from the operand the GEMM reads anyway. Vector and aux have c's
// dtype.
//
// A plan (matmul and layout descriptors plus the heuristic's algorithm) is cached per
// (shape, transposes, dtypes, epilogue, pointer alignments): a steady-state training step
// runs no heuristic query. The 32 MiB workspace is allocated once. A plain GEMM that
// cuBLASLt has no algorithm for (it may refuse a one-row or one-column operand) runs
// through cublasGemmEx instead, said once per shape on stderr. One compute thread
// per instance: the plan cache is locked, but a call sets its epilogue's vector on the
// cached descriptor.
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

  enum class Epilogue {
    kNone,
    kBias,         // c[i, :] += vector[:] after the product (vector: [n], read)
    kGeluAux,      // aux = product, c = GELU(aux) (aux: [m, n] like c, written)
    kBiasGeluAux,  // aux = product + vector, c = GELU(aux)
    kGeluGradAux,  // c = GELU'(aux) * product (aux: [m, n] like c, read)
    kBiasGradOfA,  // vector[i] = sum over k of op(a)[i, k] (vector: [m], written)
  };
  struct EpilogueArgs {
    Epilogue kind = Epilogue::kNone;
    void* vector = nullptr;
    void* aux = nullptr;
  };

  // Enqueues c[m, n] = alpha op(a)[m, k] op(b)[k, n] + beta c on stream 0; trans_a says a
  // is stored [k, m], trans_b that b is stored [n, k]. Device pointers.
  void Run(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const void* a,
           const void* b, DType ab_dtype, float beta, void* c, DType c_dtype);

  // Run with `epilogue` (its vector and aux of c's dtype). False, with nothing enqueued,
  // when cuBLASLt has no algorithm for it at this shape and alignment, or refuses it when
  // launched (aux needs a leading dimension n divisible by 8 and 16-byte alignment, so
  // those are declined up front): the caller then composes Run with its own kernels.
  bool RunWithEpilogue(const EpilogueArgs& epilogue, bool trans_a, bool trans_b, int64_t m,
                       int64_t n, int64_t k, float alpha, const void* a, const void* b,
                       DType ab_dtype, float beta, void* c, DType c_dtype);

  // How many heuristic queries have run (one per distinct plan key); for tests.
  int64_t heuristic_queries() const;
  // How many distinct epilogue plans cuBLASLt declined (their calls were composed).
  int64_t declined_epilogues() const;

 private:
  struct Plan;
  // (m, n, k, trans_a, trans_b, ab dtype, c dtype, epilogue, alignment of a, b, c,
  // vector, aux).
  using Key =
      std::tuple<int64_t, int64_t, int64_t, bool, bool, int, int, int, int, int, int, int, int>;

  // The cached plan for `key`, made with `epilogue`'s pointers (cuBLASLt's heuristic
  // reads their alignment from them); null when cuBLASLt has no algorithm for it.
  const Plan* PlanFor(const Key& key, const EpilogueArgs& epilogue);
  // Points the plan's epilogue at this call's vector and aux.
  void SetEpiloguePointers(const Plan& plan, const EpilogueArgs& epilogue);
  // Remembers that cuBLASLt declined `key`'s epilogue (the caller composes from now on).
  void Decline(const Key& key);
  // c = alpha op(a) op(b) + beta c through cublasGemmEx, for a plain GEMM with no plan.
  void RunWithoutPlan(const Key& key, float alpha, const void* a, const void* b, float beta,
                      void* c);

  void* handle_ = nullptr;       // cublasLtHandle_t
  void* blas_handle_ = nullptr;  // cublasHandle_t, for RunWithoutPlan
  void* workspace_ = nullptr;
  mutable std::mutex mu_;
  std::map<Key, std::unique_ptr<Plan>> plans_;
  int64_t heuristic_queries_ = 0;
  int64_t declined_epilogues_ = 0;
};

}  // namespace conveyor::cuda

#endif  // CONVEYOR_RUNTIME_CUDA_GEMM_LT_H_
