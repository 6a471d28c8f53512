#include "runtime/cuda/gemm_lt.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_format.h"
#include "runtime/cuda/cuda_check.h"

namespace conveyor::cuda {
namespace {

[[noreturn]] void CublasFailure(const char* call, cublasStatus_t status, const char* file,
                                int line) {
  std::fprintf(stderr, "conveyor: cuBLASLt call failed at %s:%d: %s\n  -> %s: %s\n", file, line,
               call, cublasLtGetStatusName(status), cublasLtGetStatusString(status));
  std::fflush(stderr);
  std::exit(1);
}

#define CUBLAS_CHECK(expr)                                        \
  do {                                                            \
    const cublasStatus_t conveyor_status_ = (expr);               \
    if (conveyor_status_ != CUBLAS_STATUS_SUCCESS) {              \
      CublasFailure(#expr, conveyor_status_, __FILE__, __LINE__); \
    }                                                             \
  } while (0)

cudaDataType_t CudaType(DType dtype) { return dtype == DType::kFloat32 ? CUDA_R_32F : CUDA_R_16BF; }

cublasLtHandle_t Handle(void* h) { return static_cast<cublasLtHandle_t>(h); }

const char* EpilogueName(GemmLt::Epilogue epilogue) {
  switch (epilogue) {
    case GemmLt::Epilogue::kNone:
      return "none";
    case GemmLt::Epilogue::kBias:
      return "BIAS";
    case GemmLt::Epilogue::kGeluAux:
      return "GELU_AUX";
    case GemmLt::Epilogue::kBiasGeluAux:
      return "GELU_AUX_BIAS";
    case GemmLt::Epilogue::kGeluGradAux:
      return "DGELU";
    case GemmLt::Epilogue::kBiasGradOfA:
      return "BGRADB";
  }
  return "?";
}

// The largest power of two (up to 256) dividing the address: what the heuristic may
// assume about the buffer's alignment.
int AlignmentOf(const void* p) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(p);
  int alignment = 256;
  while (alignment > 1 && address % alignment != 0) alignment /= 2;
  return alignment;
}

// "m=.. n=.. k=.. trans_a=.. ..." for messages about the GEMM a plan key describes.
template <typename Key>
std::string DescribeGemm(const Key& key) {
  const auto [m, n, k, trans_a, trans_b, ab_int, c_int, epilogue, align_a, align_b, align_c,
              align_vector, align_aux] = key;
  return absl::StrFormat(
      "GEMM m=%d n=%d k=%d trans_a=%d trans_b=%d a/b %s c %s epilogue %s (alignments a %d b %d "
      "c %d vector %d aux %d)",
      m, n, k, static_cast<int>(trans_a), static_cast<int>(trans_b),
      DTypeName(static_cast<DType>(ab_int)), DTypeName(static_cast<DType>(c_int)),
      EpilogueName(static_cast<GemmLt::Epilogue>(epilogue)), align_a, align_b, align_c,
      align_vector, align_aux);
}

// The descriptor's operations. Column-major C^T[n, m] = op(B^T) op(A^T): the transposes
// carry over unchanged, as a stored-transposed row-major matrix is a stored-transposed
// column-major one.
void SetOperations(cublasLtMatmulDesc_t desc, bool trans_a, bool trans_b) {
  const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_b, sizeof(op_b)));
  CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_a, sizeof(op_a)));
}

// The descriptor's epilogue (not kNone), its vector's type and the aux matrix's leading
// dimension. In cuBLASLt's column-major terms c is D^T [n, m]: our row vector over c's n
// columns is a bias over D's rows (EPILOGUE_BIAS), our aux [m, n] is a D-shaped matrix of
// leading dimension n, and sums of our op(a) over k are sums of its B operand, one per
// column of D (EPILOGUE_BGRADB).
void SetEpilogue(cublasLtMatmulDesc_t desc, GemmLt::Epilogue kind, cudaDataType_t c_type,
                 bool has_aux, int64_t n) {
  cublasLtEpilogue_t lt_epilogue = CUBLASLT_EPILOGUE_BIAS;
  if (kind == GemmLt::Epilogue::kGeluAux) lt_epilogue = CUBLASLT_EPILOGUE_GELU_AUX;
  if (kind == GemmLt::Epilogue::kBiasGeluAux) lt_epilogue = CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  if (kind == GemmLt::Epilogue::kGeluGradAux) lt_epilogue = CUBLASLT_EPILOGUE_DGELU;
  if (kind == GemmLt::Epilogue::kBiasGradOfA) lt_epilogue = CUBLASLT_EPILOGUE_BGRADB;
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &lt_epilogue,
                                              sizeof(lt_epilogue)));
  const int32_t vector_type = c_type;
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                              &vector_type, sizeof(vector_type)));
  if (has_aux) {
    const int64_t aux_ld = n;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD,
                                                &aux_ld, sizeof(aux_ld)));
  }
}

// The heuristic's preference: the workspace it may use and the buffers' alignments
// (cuBLASLt's A is our b, its B our a). The caller destroys it.
cublasLtMatmulPreference_t Preference(int align_a, int align_b, int align_c) {
  cublasLtMatmulPreference_t preference;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
  const uint64_t workspace = GemmLt::kWorkspaceBytes;
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace)));
  const uint32_t alignments[3] = {static_cast<uint32_t>(align_b), static_cast<uint32_t>(align_a),
                                  static_cast<uint32_t>(align_c)};
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &alignments[0], sizeof(uint32_t)));
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &alignments[1], sizeof(uint32_t)));
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &alignments[2], sizeof(uint32_t)));
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &alignments[2], sizeof(uint32_t)));
  return preference;
}

}  // namespace

struct GemmLt::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a_layout = nullptr;  // cuBLASLt's A: our b
  cublasLtMatrixLayout_t b_layout = nullptr;  // cuBLASLt's B: our a
  cublasLtMatrixLayout_t c_layout = nullptr;
  cublasLtMatmulAlgo_t algo;

  ~Plan() {
    if (c_layout != nullptr) cublasLtMatrixLayoutDestroy(c_layout);
    if (b_layout != nullptr) cublasLtMatrixLayoutDestroy(b_layout);
    if (a_layout != nullptr) cublasLtMatrixLayoutDestroy(a_layout);
    if (desc != nullptr) cublasLtMatmulDescDestroy(desc);
  }
};

GemmLt::GemmLt() {
  cublasLtHandle_t handle;
  CUBLAS_CHECK(cublasLtCreate(&handle));
  handle_ = handle;
  CUDA_CHECK(cudaMalloc(&workspace_, kWorkspaceBytes));
  cublasHandle_t blas;
  CUBLAS_CHECK(cublasCreate(&blas));
  blas_handle_ = blas;
  // cuBLAS runs on stream 0 like cuBLASLt, one call after another: they share the workspace.
  CUBLAS_CHECK(cublasSetWorkspace(blas, workspace_, kWorkspaceBytes));
}

GemmLt::~GemmLt() {
  plans_.clear();
  // Best effort at exit: the context may already be torn down.
  if (blas_handle_ != nullptr) cublasDestroy(static_cast<cublasHandle_t>(blas_handle_));
  if (workspace_ != nullptr) cudaFree(workspace_);
  if (handle_ != nullptr) cublasLtDestroy(Handle(handle_));
}

int64_t GemmLt::heuristic_queries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return heuristic_queries_;
}

int64_t GemmLt::declined_epilogues() const {
  std::lock_guard<std::mutex> lock(mu_);
  return declined_epilogues_;
}

void GemmLt::SetEpiloguePointers(const Plan& plan, const EpilogueArgs& epilogue) {
  if (epilogue.vector != nullptr) {
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                &epilogue.vector, sizeof(epilogue.vector)));
  }
  if (epilogue.aux != nullptr) {
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &epilogue.aux, sizeof(epilogue.aux)));
  }
}

const GemmLt::Plan* GemmLt::PlanFor(const Key& key, const EpilogueArgs& epilogue) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second.get();

  // The vector alignment is in the key only: the heuristic reads the pointers themselves
  // (SetEpiloguePointers).
  [[maybe_unused]] const auto [m, n, k, trans_a, trans_b, ab_int, c_int, epilogue_int, align_a,
                               align_b, align_c, align_vector, align_aux] = key;
  // cublasLt.h: the aux matrix's leading dimension must be divisible by 8 and its pointer
  // 16-byte aligned; the heuristic need not check either.
  if (epilogue.aux != nullptr && (n % 8 != 0 || align_aux < 16)) {
    ++declined_epilogues_;
    plans_.emplace(key, nullptr);
    return nullptr;
  }
  const cudaDataType_t ab_type = CudaType(static_cast<DType>(ab_int));
  const cudaDataType_t c_type = CudaType(static_cast<DType>(c_int));
  auto plan = std::make_unique<Plan>();
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  SetOperations(plan->desc, trans_a, trans_b);
  if (epilogue.kind != Epilogue::kNone) {
    SetEpilogue(plan->desc, epilogue.kind, c_type, epilogue.aux != nullptr, n);
    SetEpiloguePointers(*plan, epilogue);
  }
  // Our b: [k, n] row-major = column-major [n, k] (ld n); stored transposed ([n, k]
  // row-major) it is column-major [k, n] (ld k). Likewise our a with (m, k).
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->a_layout, ab_type, trans_b ? k : n,
                                          trans_b ? n : k, trans_b ? k : n));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->b_layout, ab_type, trans_a ? m : k,
                                          trans_a ? k : m, trans_a ? m : k));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->c_layout, c_type, n, m, n));

  cublasLtMatmulPreference_t preference = Preference(align_a, align_b, align_c);
  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  const cublasStatus_t query = cublasLtMatmulAlgoGetHeuristic(
      Handle(handle_), plan->desc, plan->a_layout, plan->b_layout, plan->c_layout, plan->c_layout,
      preference, 1, &result, &returned);
  CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(preference));
  ++heuristic_queries_;
  const bool found =
      query == CUBLAS_STATUS_SUCCESS && returned > 0 && result.state == CUBLAS_STATUS_SUCCESS;
  if (!found) {
    const std::string why = query != CUBLAS_STATUS_SUCCESS
                                ? cublasLtGetStatusString(query)
                                : absl::StrFormat("%d algorithms, state %s", returned,
                                                  cublasLtGetStatusName(result.state));
    if (epilogue.kind == Epilogue::kNone) {
      std::fprintf(stderr, "conveyor: cuBLASLt has no algorithm for %s (%s): using cublasGemmEx\n",
                   DescribeGemm(key).c_str(), why.c_str());
    } else {
      ++declined_epilogues_;
    }
    plans_.emplace(key, nullptr);  // remembered: the caller composes from now on
    return nullptr;
  }
  plan->algo = result.algo;
  return plans_.emplace(key, std::move(plan)).first->second.get();
}

void GemmLt::Decline(const Key& key) {
  std::lock_guard<std::mutex> lock(mu_);
  plans_[key] = nullptr;
  ++declined_epilogues_;
}

void GemmLt::RunWithoutPlan(const Key& key, float alpha, const void* a, const void* b, float beta,
                            void* c) {
  [[maybe_unused]] const auto [m, n, k, trans_a, trans_b, ab_int, c_int, epilogue, align_a, align_b,
                               align_c, align_vector, align_aux] = key;
  const cudaDataType_t ab_type = CudaType(static_cast<DType>(ab_int));
  // The same column-major C^T = op(B^T) op(A^T) as the plans' layouts.
  const cublasStatus_t status = cublasGemmEx(
      static_cast<cublasHandle_t>(blas_handle_), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
      trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
      static_cast<int>(k), &alpha, b, ab_type, static_cast<int>(trans_b ? k : n), a, ab_type,
      static_cast<int>(trans_a ? m : k), &beta, c, CudaType(static_cast<DType>(c_int)),
      static_cast<int>(n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (status != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "conveyor: cublasGemmEx failed for %s: %s\n", DescribeGemm(key).c_str(),
                 cublasGetStatusString(status));
    std::exit(1);
  }
}

void GemmLt::Run(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                 const void* a, const void* b, DType ab_dtype, float beta, void* c, DType c_dtype) {
  // Always runs: without an epilogue there is nothing to decline.
  RunWithEpilogue({}, trans_a, trans_b, m, n, k, alpha, a, b, ab_dtype, beta, c, c_dtype);
}

bool GemmLt::RunWithEpilogue(const EpilogueArgs& epilogue, bool trans_a, bool trans_b, int64_t m,
                             int64_t n, int64_t k, float alpha, const void* a, const void* b,
                             DType ab_dtype, float beta, void* c, DType c_dtype) {
  const Key key{m,
                n,
                k,
                trans_a,
                trans_b,
                static_cast<int>(ab_dtype),
                static_cast<int>(c_dtype),
                static_cast<int>(epilogue.kind),
                AlignmentOf(a),
                AlignmentOf(b),
                AlignmentOf(c),
                epilogue.vector == nullptr ? 0 : AlignmentOf(epilogue.vector),
                epilogue.aux == nullptr ? 0 : AlignmentOf(epilogue.aux)};
  const Plan* plan = PlanFor(key, epilogue);
  if (plan == nullptr) {
    if (epilogue.kind != Epilogue::kNone) return false;
    RunWithoutPlan(key, alpha, a, b, beta, c);
    return true;
  }
  SetEpiloguePointers(*plan, epilogue);
  const cublasStatus_t status = cublasLtMatmul(
      Handle(handle_), plan->desc, &alpha, b, plan->a_layout, a, plan->b_layout, &beta, c,
      plan->c_layout, c, plan->c_layout, &plan->algo, workspace_, kWorkspaceBytes, /*stream=*/0);
  if (status == CUBLAS_STATUS_SUCCESS) return true;
  // A refused epilogue enqueued nothing: the caller can still compose it.
  const bool refused =
      status == CUBLAS_STATUS_NOT_SUPPORTED || status == CUBLAS_STATUS_INVALID_VALUE;
  std::fprintf(stderr, "conveyor: cublasLtMatmul failed for %s: %s: %s%s\n",
               DescribeGemm(key).c_str(), cublasLtGetStatusName(status),
               cublasLtGetStatusString(status),
               epilogue.kind != Epilogue::kNone && refused ? " (composing it from now on)" : "");
  if (epilogue.kind == Epilogue::kNone || !refused) std::exit(1);
  Decline(key);
  return false;
}

}  // namespace conveyor::cuda
