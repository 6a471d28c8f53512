#include "runtime/cuda/cuda_ops.h"

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/cuda/activation_kernels.h"
#include "runtime/cuda/attention_kernels.h"
#include "runtime/cuda/cast_kernels.h"
#include "runtime/cuda/column_sum_plan.h"
#include "runtime/cuda/cross_entropy_kernels.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/cuda_memory.h"
#include "runtime/cuda/cudnn_attention.h"
#include "runtime/cuda/dropout_kernels.h"
#include "runtime/cuda/elementwise_kernels.h"
#include "runtime/cuda/embedding_kernels.h"
#include "runtime/cuda/moe_kernels.h"
#include "runtime/cuda/norm_kernels.h"
#include "runtime/cuda/philox_uniform.h"
#include "runtime/cuda/ring_attention_kernels.h"
#include "runtime/cuda/rope_kernels.h"

namespace conveyor {
namespace {

[[noreturn]] void Misuse(const char* op, const std::string& message) {
  cuda::Fatal(op, message.c_str());
}

// Ends the process with `message` unless `condition`; the message is built only then,
// so the checks cost the hot path nothing but the comparisons.
#define REQUIRE(condition, op, message)        \
  do {                                         \
    if (!(condition)) Misuse((op), (message)); \
  } while (0)

std::string Describe(const char* name, const Tensor& t) {
  return absl::StrCat(name, " ", DTypeName(t.dtype()), " ", t.ShapeString(), " on ",
                      DeviceName(t.device()));
}

// `t` is a device tensor (with storage unless it has no elements).
void RequireDevice(const char* op, const char* name, const Tensor& t) {
  REQUIRE(t.device() == Device::kCuda, op, absl::StrCat(Describe(name, t), ": not a GPU tensor"));
  REQUIRE(!t.empty() || t.numel() == 0, op, absl::StrCat(name, " has no storage"));
}

void RequireFloat(const char* op, const char* name, const Tensor& t) {
  RequireDevice(op, name, t);
  REQUIRE(t.dtype() == DType::kFloat32, op, absl::StrCat(Describe(name, t), ": must be fp32"));
}

void RequireSameType(const char* op, const char* name, const Tensor& t, const char* ref_name,
                     const Tensor& ref) {
  RequireDevice(op, name, t);
  REQUIRE(t.dtype() == ref.dtype(), op,
          absl::StrCat(Describe(name, t), ": dtype differs from ", Describe(ref_name, ref)));
}

void RequireNumel(const char* op, const char* name, const Tensor& t, int64_t numel) {
  REQUIRE(t.numel() == numel, op,
          absl::StrCat(Describe(name, t), ": expected ", numel, " elements"));
}

// For GEMM operands, which may be larger buffers of which the op uses the first elements.
void RequireAtLeast(const char* op, const char* name, const Tensor& t, int64_t numel) {
  REQUIRE(t.numel() >= numel, op,
          absl::StrCat(Describe(name, t), ": needs at least ", numel, " elements"));
}

// A linear layer's operands hold exactly [rows, in] and [rows, out] elements (a GEMM may
// be handed larger buffers; a layer may not).
void RequireLinearOperands(const char* op, const char* in_name, const Tensor& rows_by_in,
                           const char* out_name, const Tensor& rows_by_out, int64_t rows,
                           int64_t in, int64_t out) {
  RequireNumel(op, in_name, rows_by_in, rows * in);
  RequireNumel(op, out_name, rows_by_out, rows * out);
}

// Rows of a tensor viewed as [rows, width].
int64_t RowsOf(const char* op, const char* name, const Tensor& t, int64_t width) {
  REQUIRE(width > 0 && t.numel() % width == 0, op,
          absl::StrCat(Describe(name, t), ": not a whole number of rows of width ", width));
  return t.numel() / width;
}

void RequireAttentionShape(const char* op, const AttentionShape& s) {
  REQUIRE(s.batch > 0 && s.seq > 0 && s.groups > 0 && s.heads_per_group > 0 && s.head_dim > 0, op,
          "empty attention shape");
  REQUIRE(
      cuda::WidestAttentionHead(s) <= cuda::kMaxAttentionHeadDim, op,
      absl::StrCat("head_dim ", s.head_dim, " or value_dim ", s.value_dim(), " > ",
                   cuda::kMaxAttentionHeadDim, ": not supported by the CUDA attention kernels"));
}

}  // namespace

CudaOps::CudaOps(DType compute_dtype, bool synchronize_each_op, bool cudnn_attention)
    : compute_dtype_(compute_dtype), synchronize_each_op_(synchronize_each_op) {
  cuda::InstallDeviceMemory();
  gemm_ = std::make_unique<cuda::GemmLt>();
  if (cudnn_attention) cudnn_attention_ = std::make_unique<cuda::CudnnAttention>();
}

CudaOps::~CudaOps() = default;

void CudaOps::Finish(const char* op) const {
  cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess && synchronize_each_op_) err = cudaDeviceSynchronize();
  if (err != cudaSuccess) {
    const std::string call = synchronize_each_op_
                                 ? absl::StrCat("CudaOps::", op, " (synchronised after the op)")
                                 : absl::StrCat("CudaOps::", op, " (launch)");
    cuda::CudaFailure(call.c_str(), err, __FILE__, __LINE__);
  }
}

void CudaOps::Cast(const Tensor& in, Tensor* out) const {
  RequireDevice("Cast", "in", in);
  RequireDevice("Cast", "out", *out);
  RequireNumel("Cast", "out", *out, in.numel());
  if (in.numel() == 0) return;
  if (in.dtype() == out->dtype()) {
    CUDA_CHECK(cudaMemcpyAsync(out->raw(), in.raw(), in.nbytes(), cudaMemcpyDeviceToDevice, 0));
  } else if (in.dtype() == DType::kFloat32) {
    CUDA_CHECK(LaunchFloatToBFloat16(static_cast<const float*>(in.raw()),
                                     static_cast<BFloat16*>(out->raw()), in.numel()));
  } else {
    CUDA_CHECK(LaunchBFloat16ToFloat(static_cast<const BFloat16*>(in.raw()),
                                     static_cast<float*>(out->raw()), in.numel()));
  }
  Finish("Cast");
}

void CudaOps::CheckGemm(const char* op, int64_t m, int64_t n, int64_t k, const Tensor& a,
                        const Tensor& b, const Tensor& c) const {
  RequireDevice(op, "a", a);
  RequireSameType(op, "b", b, "a", a);
  RequireDevice(op, "c", c);
  REQUIRE(c.dtype() == DType::kFloat32 || c.dtype() == a.dtype(), op,
          absl::StrCat(Describe("c", c), ": must be fp32 or the dtype of a and b"));
  REQUIRE(m >= 0 && n >= 0 && k >= 0, op, "negative dimension");
  RequireAtLeast(op, "a", a, m * k);
  RequireAtLeast(op, "b", b, k * n);
  RequireAtLeast(op, "c", c, m * n);
}

void CudaOps::Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                   const Tensor& a, const Tensor& b, float beta, Tensor* c) const {
  CheckGemm("Gemm", m, n, k, a, b, *c);
  if (m == 0 || n == 0) return;
  if (k == 0 && beta == 0.0f) {  // an empty sum, and c not read (as BLAS: NaNs in c go)
    CUDA_CHECK(cudaMemsetAsync(c->raw(), 0, m * n * SizeOf(c->dtype()), /*stream=*/0));
  } else if (k == 0) {  // an empty sum: c = beta c
    if (beta != 1.0f) cuda::LaunchScale(c->dtype(), beta, c->raw(), m * n);
  } else {
    gemm_->Run(trans_a, trans_b, m, n, k, alpha, a.raw(), b.raw(), a.dtype(), beta, c->raw(),
               c->dtype());
  }
  Finish("Gemm");
}

Tensor CudaOps::EpilogueBias(const char* op, const Tensor& bias, int64_t width, DType dtype) const {
  RequireDevice(op, "bias", bias);
  RequireNumel(op, "bias", bias, width);
  return CastTo(bias, dtype);
}

void CudaOps::LinearForward(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor* y) const {
  const int64_t rows = x.dim(0), out = w.dim(0), in = w.dim(1);
  if (bias == nullptr || rows == 0 || out == 0 || in == 0) {
    Ops::LinearForward(x, w, bias, y);
    return;
  }
  CheckGemm("LinearForward", rows, out, in, x, w, *y);
  RequireLinearOperands("LinearForward", "x", x, "y", *y, rows, in, out);
  Tensor y_type_bias = EpilogueBias("LinearForward", *bias, out, y->dtype());
  if (!gemm_->RunWithEpilogue({cuda::GemmLt::Epilogue::kBias, y_type_bias.raw()}, false, true, rows,
                              out, in, 1.0f, x.raw(), w.raw(), x.dtype(), 0.0f, y->raw(),
                              y->dtype())) {
    Ops::LinearForward(x, w, bias, y);
    return;
  }
  Finish("LinearForward");
}

void CudaOps::LinearGeluForward(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor* pre,
                                Tensor* y) const {
  const int64_t rows = x.dim(0), out = w.dim(0), in = w.dim(1);
  if (rows == 0 || out == 0 || in == 0) {
    Ops::LinearGeluForward(x, w, bias, pre, y);
    return;
  }
  CheckGemm("LinearGeluForward", rows, out, in, x, w, *y);
  RequireLinearOperands("LinearGeluForward", "x", x, "y", *y, rows, in, out);
  RequireSameType("LinearGeluForward", "pre", *pre, "y", *y);
  RequireNumel("LinearGeluForward", "pre", *pre, rows * out);
  cuda::GemmLt::EpilogueArgs epilogue{cuda::GemmLt::Epilogue::kGeluAux, nullptr, pre->raw()};
  Tensor y_type_bias;
  if (bias != nullptr) {
    y_type_bias = EpilogueBias("LinearGeluForward", *bias, out, y->dtype());
    epilogue = {cuda::GemmLt::Epilogue::kBiasGeluAux, y_type_bias.raw(), pre->raw()};
  }
  if (!gemm_->RunWithEpilogue(epilogue, false, true, rows, out, in, 1.0f, x.raw(), w.raw(),
                              x.dtype(), 0.0f, y->raw(), y->dtype())) {
    Ops::LinearGeluForward(x, w, bias, pre, y);
    return;
  }
  Finish("LinearGeluForward");
}

void CudaOps::LinearGeluBackwardInput(const Tensor& dy, const Tensor& w, const Tensor& pre,
                                      Tensor* dx) const {
  const int64_t rows = dy.dim(0), out = w.dim(0), in = w.dim(1);
  if (rows == 0 || out == 0 || in == 0) {
    Ops::LinearGeluBackwardInput(dy, w, pre, dx);
    return;
  }
  CheckGemm("LinearGeluBackwardInput", rows, in, out, dy, w, *dx);
  RequireLinearOperands("LinearGeluBackwardInput", "dx", *dx, "dy", dy, rows, in, out);
  RequireSameType("LinearGeluBackwardInput", "pre", pre, "dx", *dx);
  RequireNumel("LinearGeluBackwardInput", "pre", pre, rows * in);
  // The epilogue only reads aux here (cuBLASLt's pointer is not const).
  Tensor read_only_pre = pre;
  if (!gemm_->RunWithEpilogue({cuda::GemmLt::Epilogue::kGeluGradAux, nullptr, read_only_pre.raw()},
                              false, false, rows, in, out, 1.0f, dy.raw(), w.raw(), dy.dtype(),
                              0.0f, dx->raw(), dx->dtype())) {
    Ops::LinearGeluBackwardInput(dy, w, pre, dx);
    return;
  }
  Finish("LinearGeluBackwardInput");
}

void CudaOps::LinearWeightGrad(const Tensor& x, const Tensor& dy, Tensor* dw, Tensor* dbias) const {
  const int64_t rows = dy.dim(0), out = dw->dim(0), in = dw->dim(1);
  if (dbias == nullptr || rows == 0 || out == 0 || in == 0) {
    Ops::LinearWeightGrad(x, dy, dw, dbias);
    return;
  }
  CheckGemm("LinearWeightGrad", out, in, rows, dy, x, *dw);
  RequireLinearOperands("LinearWeightGrad", "x", x, "dy", dy, rows, in, out);
  RequireFloat("LinearWeightGrad", "dw", *dw);
  RequireFloat("LinearWeightGrad", "dbias", *dbias);
  RequireNumel("LinearWeightGrad", "dbias", *dbias, out);
  // The epilogue writes this step's sums (in dw's dtype, fp32); the accumulator adds them.
  Tensor sums = NewFloatActivation({out});
  if (!gemm_->RunWithEpilogue({cuda::GemmLt::Epilogue::kBiasGradOfA, sums.raw()}, true, false, out,
                              in, rows, 1.0f, dy.raw(), x.raw(), dy.dtype(), 1.0f, dw->raw(),
                              dw->dtype())) {
    Ops::LinearWeightGrad(x, dy, dw, dbias);
    return;
  }
  Add(sums, dbias);
  Finish("LinearWeightGrad");
}

void CudaOps::AddBias(const Tensor& bias, Tensor* y) const {
  RequireDevice("AddBias", "bias", bias);
  RequireDevice("AddBias", "y", *y);
  const int64_t width = bias.numel();
  const int64_t rows = RowsOf("AddBias", "y", *y, width);
  cuda::LaunchAddBias(y->dtype(), bias.dtype(), bias.raw(), rows, width, y->raw());
  Finish("AddBias");
}

void* CudaOps::ColumnSumScratch(int64_t rows, int64_t width) const {
  return column_sums_.Reserve(cuda::PlanColumnSum(rows, width).scratch_bytes(width));
}

void CudaOps::AccumulateBiasGrad(const Tensor& dy, Tensor* dbias) const {
  RequireDevice("AccumulateBiasGrad", "dy", dy);
  RequireFloat("AccumulateBiasGrad", "dbias", *dbias);
  const int64_t width = dbias->numel();
  const int64_t rows = RowsOf("AccumulateBiasGrad", "dy", dy, width);
  cuda::LaunchAccumulateBiasGrad(dy.dtype(), dy.raw(), rows, width, ColumnSumScratch(rows, width),
                                 dbias->data());
  Finish("AccumulateBiasGrad");
}

void CudaOps::Add(const Tensor& x, Tensor* y) const {
  RequireDevice("Add", "x", x);
  RequireSameType("Add", "y", *y, "x", x);
  RequireNumel("Add", "y", *y, x.numel());
  cuda::LaunchAdd(x.dtype(), x.raw(), y->raw(), x.numel());
  Finish("Add");
}

void CudaOps::AddPositionRows(const Tensor& table, absl::Span<const int32_t> positions,
                              Tensor* x) const {
  const char* op = "AddPositionRows";
  RequireDevice(op, "table", table);
  RequireDevice(op, "x", *x);
  REQUIRE(table.rank() == 2, op, Describe("table", table) + ": must be [positions, width]");
  const int64_t width = table.dim(1);
  const int64_t rows = RowsOf(op, "x", *x, width);
  REQUIRE(static_cast<int64_t>(positions.size()) == rows, op,
          absl::StrCat(positions.size(), " positions for ", rows, " rows"));
  const int32_t* device_positions = ints_.Upload(positions.data(), rows);
  cuda::LaunchAddPositionRows(x->dtype(), table.dtype(), table.raw(), device_positions, rows,
                              width, x->raw());
  Finish(op);
}

void CudaOps::AccumulatePositionGrad(const Tensor& dx, absl::Span<const int32_t> positions,
                                     Tensor* dtable) const {
  // The position table's gradient is an embedding gradient with positions for ids.
  EmbeddingBackwardWeight(dx, /*vocab_start=*/0, positions, dtable);
}

void CudaOps::NormForward(NormKind kind, const Tensor& x, const Tensor& gamma, const Tensor* beta,
                          float eps, Tensor* y, Tensor* mean, Tensor* rstd) const {
  const char* op = "NormForward";
  RequireDevice(op, "x", x);
  RequireSameType(op, "y", *y, "x", x);
  RequireDevice(op, "gamma", gamma);
  if (beta != nullptr) RequireSameType(op, "beta", *beta, "gamma", gamma);
  REQUIRE(kind == NormKind::kLayerNorm || beta == nullptr, op, "RMSNorm takes no beta");
  const int64_t width = gamma.numel();
  const int64_t rows = RowsOf(op, "x", x, width);
  RequireNumel(op, "y", *y, x.numel());
  RequireFloat(op, "mean", *mean);
  RequireFloat(op, "rstd", *rstd);
  RequireNumel(op, "mean", *mean, rows);
  RequireNumel(op, "rstd", *rstd, rows);
  cuda::LaunchNormForward(kind == NormKind::kLayerNorm, x.dtype(), gamma.dtype(), x.raw(),
                          gamma.raw(), beta != nullptr ? beta->raw() : nullptr, rows, width, eps,
                          y->raw(), mean->data(), rstd->data());
  Finish(op);
}

void CudaOps::NormBackwardInput(NormKind kind, const Tensor& dy, const Tensor& x,
                                const Tensor& gamma, const Tensor& mean, const Tensor& rstd,
                                Tensor* dx) const {
  const char* op = "NormBackwardInput";
  RequireDevice(op, "x", x);
  RequireSameType(op, "dy", dy, "x", x);
  RequireSameType(op, "dx", *dx, "x", x);
  RequireDevice(op, "gamma", gamma);
  const int64_t width = gamma.numel();
  const int64_t rows = RowsOf(op, "x", x, width);
  RequireNumel(op, "dy", dy, x.numel());
  RequireNumel(op, "dx", *dx, x.numel());
  RequireFloat(op, "mean", mean);
  RequireFloat(op, "rstd", rstd);
  RequireNumel(op, "mean", mean, rows);
  RequireNumel(op, "rstd", rstd, rows);
  cuda::LaunchNormBackwardInput(kind == NormKind::kLayerNorm, x.dtype(), gamma.dtype(), dy.raw(),
                                x.raw(), gamma.raw(), mean.data(), rstd.data(), rows, width,
                                dx->raw());
  Finish(op);
}

void CudaOps::NormBackwardWeight(const Tensor& dy, const Tensor& x, const Tensor& mean,
                                 const Tensor& rstd, Tensor* dgamma, Tensor* dbeta) const {
  const char* op = "NormBackwardWeight";
  RequireDevice(op, "x", x);
  RequireSameType(op, "dy", dy, "x", x);
  RequireFloat(op, "dgamma", *dgamma);
  const int64_t width = dgamma->numel();
  const int64_t rows = RowsOf(op, "x", x, width);
  RequireNumel(op, "dy", dy, x.numel());
  RequireFloat(op, "mean", mean);
  RequireFloat(op, "rstd", rstd);
  RequireNumel(op, "mean", mean, rows);
  RequireNumel(op, "rstd", rstd, rows);
  if (dbeta != nullptr) {
    RequireFloat(op, "dbeta", *dbeta);
    RequireNumel(op, "dbeta", *dbeta, width);
  }
  cuda::LaunchNormBackwardWeight(x.dtype(), dy.raw(), x.raw(), mean.data(), rstd.data(), rows,
                                 width, ColumnSumScratch(rows, width), dgamma->data(),
                                 dbeta != nullptr ? dbeta->data() : nullptr);
  Finish(op);
}

void CudaOps::GeluForward(const Tensor& x, Tensor* y) const {
  RequireDevice("GeluForward", "x", x);
  RequireSameType("GeluForward", "y", *y, "x", x);
  RequireNumel("GeluForward", "y", *y, x.numel());
  cuda::LaunchGeluForward(x.dtype(), x.raw(), x.numel(), y->raw());
  Finish("GeluForward");
}

void CudaOps::GeluBackward(const Tensor& x, const Tensor& dy, Tensor* dx) const {
  RequireDevice("GeluBackward", "x", x);
  RequireSameType("GeluBackward", "dy", dy, "x", x);
  RequireSameType("GeluBackward", "dx", *dx, "x", x);
  RequireNumel("GeluBackward", "dy", dy, x.numel());
  RequireNumel("GeluBackward", "dx", *dx, x.numel());
  cuda::LaunchGeluBackward(x.dtype(), x.raw(), dy.raw(), x.numel(), dx->raw());
  Finish("GeluBackward");
}

void CudaOps::SquaredReluForward(const Tensor& x, Tensor* y) const {
  RequireDevice("SquaredReluForward", "x", x);
  RequireSameType("SquaredReluForward", "y", *y, "x", x);
  RequireNumel("SquaredReluForward", "y", *y, x.numel());
  cuda::LaunchSquaredReluForward(x.dtype(), x.raw(), x.numel(), y->raw());
  Finish("SquaredReluForward");
}

void CudaOps::SquaredReluBackward(const Tensor& x, const Tensor& dy, Tensor* dx) const {
  RequireDevice("SquaredReluBackward", "x", x);
  RequireSameType("SquaredReluBackward", "dy", dy, "x", x);
  RequireSameType("SquaredReluBackward", "dx", *dx, "x", x);
  RequireNumel("SquaredReluBackward", "dy", dy, x.numel());
  RequireNumel("SquaredReluBackward", "dx", *dx, x.numel());
  cuda::LaunchSquaredReluBackward(x.dtype(), x.raw(), dy.raw(), x.numel(), dx->raw());
  Finish("SquaredReluBackward");
}

void CudaOps::SwigluForward(const Tensor& x, Tensor* y) const {
  RequireDevice("SwigluForward", "x", x);
  RequireSameType("SwigluForward", "y", *y, "x", x);
  REQUIRE(y->rank() >= 1, "SwigluForward", "y has no dimensions");
  const int64_t width = y->dim(y->rank() - 1);
  const int64_t rows = RowsOf("SwigluForward", "y", *y, width);
  RequireNumel("SwigluForward", "x", x, 2 * rows * width);
  cuda::LaunchSwigluForward(x.dtype(), x.raw(), rows, width, y->raw());
  Finish("SwigluForward");
}

void CudaOps::SwigluBackward(const Tensor& x, const Tensor& dy, Tensor* dx) const {
  RequireDevice("SwigluBackward", "x", x);
  RequireSameType("SwigluBackward", "dy", dy, "x", x);
  RequireSameType("SwigluBackward", "dx", *dx, "x", x);
  REQUIRE(dy.rank() >= 1, "SwigluBackward", "dy has no dimensions");
  const int64_t width = dy.dim(dy.rank() - 1);
  const int64_t rows = RowsOf("SwigluBackward", "dy", dy, width);
  RequireNumel("SwigluBackward", "x", x, 2 * rows * width);
  RequireNumel("SwigluBackward", "dx", *dx, 2 * rows * width);
  cuda::LaunchSwigluBackward(x.dtype(), x.raw(), dy.raw(), rows, width, dx->raw());
  Finish("SwigluBackward");
}

void CudaOps::Dropout(const CounterRng& rng, float p, uint64_t first_index, const Tensor& in,
                      Tensor* out) const {
  RequireDevice("Dropout", "in", in);
  RequireSameType("Dropout", "out", *out, "in", in);
  RequireNumel("Dropout", "out", *out, in.numel());
  REQUIRE(p < 1.0f, "Dropout", absl::StrCat("p = ", p, " must be below 1"));
  if (in.numel() == 0) return;
  if (p <= 0.0f) {
    if (out->raw() != in.raw()) {
      CUDA_CHECK(cudaMemcpyAsync(out->raw(), in.raw(), in.nbytes(), cudaMemcpyDeviceToDevice, 0));
    }
  } else {
    cuda::LaunchDropout(in.dtype(), cuda::KeyOf(rng), p, first_index, in.raw(), in.numel(),
                        out->raw());
  }
  Finish("Dropout");
}

void CudaOps::BiasDropoutAdd(const Tensor* bias, const CounterRng& rng, float p,
                             uint64_t first_index, const Tensor& residual, Tensor* y) const {
  RequireDevice("BiasDropoutAdd", "residual", residual);
  RequireSameType("BiasDropoutAdd", "y", *y, "residual", residual);
  RequireNumel("BiasDropoutAdd", "y", *y, residual.numel());
  REQUIRE(p >= 0.0f && p < 1.0f, "BiasDropoutAdd", absl::StrCat("p = ", p, " must be in [0, 1)"));
  const int64_t width = y->dim(y->rank() - 1);
  if (bias != nullptr) {
    RequireDevice("BiasDropoutAdd", "bias", *bias);
    RequireNumel("BiasDropoutAdd", "bias", *bias, width);
  }
  const int64_t rows = RowsOf("BiasDropoutAdd", "y", *y, width);
  cuda::LaunchBiasDropoutAdd(y->dtype(), bias != nullptr ? bias->dtype() : DType::kFloat32,
                             bias != nullptr ? bias->raw() : nullptr, cuda::KeyOf(rng), p,
                             first_index, residual.raw(), rows, width, y->raw());
  Finish("BiasDropoutAdd");
}

const float* CudaOps::DeviceRopeTable(const RopeTable& table) const {
  const size_t n = table.cos.size();
  const bool same = rope_host_.size() == 2 * n &&
                    std::memcmp(rope_host_.data(), table.cos.data(), n * sizeof(float)) == 0 &&
                    std::memcmp(rope_host_.data() + n, table.sin.data(), n * sizeof(float)) == 0;
  if (!same) {
    rope_host_.assign(table.cos.begin(), table.cos.end());
    rope_host_.insert(rope_host_.end(), table.sin.begin(), table.sin.end());
    rope_.Upload(rope_host_.data(), static_cast<int64_t>(rope_host_.size()));
  }
  return static_cast<const float*>(rope_.Reserve(0));
}

void CudaOps::CopyColumns(const Tensor& src, int64_t src_col, int64_t width, Tensor* dst,
                          int64_t dst_col) const {
  const char* op = "CopyColumns";
  RequireDevice(op, "src", src);
  RequireSameType(op, "dst", *dst, "src", src);
  const int64_t src_width = src.shape().back(), dst_width = dst->shape().back();
  const int64_t rows = RowsOf(op, "src", src, src_width);
  REQUIRE(RowsOf(op, "dst", *dst, dst_width) == rows && src_col + width <= src_width &&
              dst_col + width <= dst_width,
          op,
          absl::StrCat("columns [", src_col, ", +", width, ") of ", Describe("src", src), " into [",
                       dst_col, ", +", width, ") of ", Describe("dst", *dst)));
  if (rows == 0 || width == 0) return;
  const size_t element = SizeOf(src.dtype());
  CUDA_CHECK(
      cudaMemcpy2DAsync(static_cast<char*>(dst->raw()) + dst_col * element, dst_width * element,
                        static_cast<const char*>(src.raw()) + src_col * element,
                        src_width * element, width * element, rows, cudaMemcpyDeviceToDevice, 0));
  Finish(op);
}

void CudaOps::RotateQueriesAndKeys(const RopeTable& table, const AttentionShape& shape,
                                   absl::Span<const int32_t> positions, bool inverse,
                                   Tensor* qkv) const {
  const char* op = "RotateQueriesAndKeys";
  RequireDevice(op, "qkv", *qkv);
  RequireAttentionShape(op, shape);
  REQUIRE(2 * table.half <= shape.head_dim && table.half > 0, op,
          absl::StrCat("RoPE table of ", 2 * table.half, " rotated dims for head_dim ",
                       shape.head_dim));
  REQUIRE(table.cos.size() == table.sin.size(), op, "RoPE cos and sin tables differ in size");
  const int64_t tokens = RowsOf(op, "qkv", *qkv, shape.qkv_width());
  REQUIRE(static_cast<int64_t>(positions.size()) == tokens, op,
          absl::StrCat(positions.size(), " positions for ", tokens, " rows"));
  const float* device_table = DeviceRopeTable(table);
  const int32_t* device_positions = ints_.Upload(positions.data(), tokens);
  cuda::LaunchRotateQueriesAndKeys(qkv->dtype(), device_table, device_table + table.cos.size(),
                                   table.half, shape, device_positions, inverse, tokens,
                                   qkv->raw());
  Finish(op);
}

namespace {

cuda::AttentionDropoutArgs DropoutArgsOf(const char* op, const AttentionDropout& d) {
  cuda::AttentionDropoutArgs args;
  if (d.rng == nullptr || d.p <= 0.0f) return args;
  REQUIRE(d.p < 1.0f, op, absl::StrCat("attention dropout p = ", d.p, " must be below 1"));
  args.enabled = true;
  args.key = cuda::KeyOf(*d.rng);
  args.p = d.p;
  args.first_sample = d.first_sample;
  args.first_head = d.first_head;
  args.total_heads = d.total_heads;
  return args;
}

}  // namespace

// cuDNN's kernels are bf16 (fp32 runs compare tightly with the CPU, on the built-in
// kernels) and draw their own dropout mask, not the CPU's Philox one.
// The document mask and a sliding window go to the built-in kernels too.
bool CudaOps::MayUseCudnnAttention(const Tensor& qkv, const AttentionDropout& dropout,
                                   const AttentionMask& mask) const {
  const bool has_dropout = dropout.rng != nullptr && dropout.p > 0.0f;
  return cudnn_attention_ != nullptr && qkv.dtype() == DType::kBFloat16 && !has_dropout &&
         mask.document_start.empty() && mask.window < 0;
}

const int32_t* CudaOps::DeviceDocumentStarts(const char* op, const AttentionShape& shape,
                                             const AttentionMask& mask) const {
  REQUIRE(mask.query_positions.empty() && mask.key_positions.empty(), op,
          "positions are for the block ops (ring attention); the whole-sample attention "
          "numbers its rows itself");
  if (mask.document_start.empty()) return nullptr;
  REQUIRE(static_cast<int64_t>(mask.document_start.size()) == shape.batch * shape.seq, op,
          absl::StrCat("document_start holds ", mask.document_start.size(),
                       " rows for batch * seq = ", shape.batch * shape.seq));
  return document_starts_.Upload(mask.document_start.data(),
                                 static_cast<int64_t>(mask.document_start.size()));
}

void CudaOps::AttentionForward(const AttentionShape& shape, const Tensor& qkv, float scale,
                               const AttentionDropout& dropout, const AttentionMask& mask,
                               Tensor* saved, Tensor* ctx) const {
  const char* op = "AttentionForward";
  RequireAttentionShape(op, shape);
  RequireDevice(op, "qkv", qkv);
  RequireSameType(op, "ctx", *ctx, "qkv", qkv);
  RequireNumel(op, "qkv", qkv, shape.batch * shape.seq * shape.qkv_width());
  RequireNumel(op, "ctx", *ctx, shape.batch * shape.seq * shape.context_width());
  const cuda::AttentionDropoutArgs drop = DropoutArgsOf(op, dropout);
  const int32_t* document_start = DeviceDocumentStarts(op, shape, mask);
  *saved = NewFloatActivation({shape.batch, shape.heads(), shape.seq});
  if (MayUseCudnnAttention(qkv, dropout, mask) &&
      cudnn_attention_->Forward(shape, qkv.raw(), scale, saved->data(), ctx->raw())) {
    ++attention_paths_.cudnn_forward;
  } else {
    cuda::LaunchAttentionForward(qkv.dtype(), shape, qkv.raw(), scale, drop, document_start,
                                 mask.window, saved->data(), ctx->raw());
    ++attention_paths_.builtin_forward;
  }
  Finish(op);
}

void CudaOps::AttentionBackward(const AttentionShape& shape, const Tensor& qkv, const Tensor& saved,
                                const Tensor& ctx, const Tensor& dctx, float scale,
                                const AttentionDropout& dropout, const AttentionMask& mask,
                                Tensor* dqkv) const {
  const char* op = "AttentionBackward";
  RequireAttentionShape(op, shape);
  RequireDevice(op, "qkv", qkv);
  RequireSameType(op, "ctx", ctx, "qkv", qkv);
  RequireSameType(op, "dctx", dctx, "qkv", qkv);
  RequireSameType(op, "dqkv", *dqkv, "qkv", qkv);
  RequireNumel(op, "qkv", qkv, shape.batch * shape.seq * shape.qkv_width());
  RequireNumel(op, "dqkv", *dqkv, qkv.numel());
  RequireNumel(op, "ctx", ctx, shape.batch * shape.seq * shape.context_width());
  RequireNumel(op, "dctx", dctx, ctx.numel());
  RequireFloat(op, "saved", saved);
  REQUIRE(saved.numel() == shape.batch * shape.heads() * shape.seq, op,
          absl::StrCat(Describe("saved", saved),
                       ": expected the [batch, heads, seq] log-sum-exp of "
                       "CudaOps::AttentionForward"));
  const cuda::AttentionDropoutArgs drop = DropoutArgsOf(op, dropout);
  const int32_t* document_start = DeviceDocumentStarts(op, shape, mask);
  if (MayUseCudnnAttention(qkv, dropout, mask) &&
      cudnn_attention_->Backward(shape, qkv.raw(), saved.data(), ctx.raw(), dctx.raw(), scale,
                                 dqkv->raw())) {
    ++attention_paths_.cudnn_backward;
  } else {
    Tensor row_dot = NewFloatActivation({shape.batch, shape.heads(), shape.seq});
    cuda::LaunchAttentionBackward(qkv.dtype(), shape, qkv.raw(), saved.data(), ctx.raw(),
                                  dctx.raw(), scale, drop, document_start, mask.window,
                                  row_dot.data(), dqkv->raw());
    // row_dot goes back to the caching allocator before the kernels end: safe, since any
    // reuse is queued behind them on stream 0.
    ++attention_paths_.builtin_backward;
  }
  Finish(op);
}

void CudaOps::PackKeysValues(const AttentionShape& shape, const Tensor& qkv, Tensor* kv) const {
  const char* op = "PackKeysValues";
  RequireAttentionShape(op, shape);
  RequireDevice(op, "qkv", qkv);
  RequireSameType(op, "kv", *kv, "qkv", qkv);
  RequireNumel(op, "qkv", qkv, shape.batch * shape.seq * shape.qkv_width());
  RequireNumel(op, "kv", *kv, shape.batch * shape.seq * shape.kv_width());
  cuda::LaunchPackKeysValues(qkv.dtype(), shape, qkv.raw(), kv->raw());
  Finish(op);
}

void CudaOps::AddKeyValueGrad(const AttentionShape& shape, const Tensor& dkv, Tensor* dqkv) const {
  const char* op = "AddKeyValueGrad";
  RequireAttentionShape(op, shape);
  RequireDevice(op, "dqkv", *dqkv);
  RequireFloat(op, "dkv", dkv);
  RequireNumel(op, "dqkv", *dqkv, shape.batch * shape.seq * shape.qkv_width());
  RequireNumel(op, "dkv", dkv, shape.batch * shape.seq * shape.kv_width());
  cuda::LaunchAddKeyValueGrad(dqkv->dtype(), shape, dkv.data(), dqkv->raw());
  Finish(op);
}

cuda::AttentionBlockArgs CudaOps::DeviceBlockArgs(const char* op, const AttentionShape& shape,
                                                  int64_t key_rows, const AttentionMask& mask,
                                                  const AttentionDropout& dropout) const {
  REQUIRE(static_cast<int64_t>(mask.query_positions.size()) == shape.seq &&
              static_cast<int64_t>(mask.key_positions.size()) == key_rows,
          op, "a block's mask needs one position per query row and per key row");
  REQUIRE(mask.document_start.empty() ||
              static_cast<int64_t>(mask.document_start.size()) == shape.batch * shape.seq,
          op, "document_start needs batch * seq rows");
  cuda::AttentionBlockArgs args;
  args.shape = shape;
  args.key_rows = key_rows;
  args.query_positions = query_positions_.Upload(mask.query_positions.data(), shape.seq);
  args.key_positions = key_positions_.Upload(mask.key_positions.data(), key_rows);
  args.document_start = DeviceDocumentStarts(op, shape, {{}, {}, mask.document_start});
  args.sample_length = dropout.sample_length;
  args.window = mask.window;
  return args;
}

void CudaOps::AttentionBlockForward(const AttentionShape& shape, int64_t key_rows,
                                    const AttentionMask& mask, const Tensor& qkv, const Tensor& kv,
                                    float scale, const AttentionDropout& dropout, bool first,
                                    Tensor* ctx, Tensor* lse) const {
  const char* op = "AttentionBlockForward";
  RequireAttentionShape(op, shape);
  RequireDevice(op, "qkv", qkv);
  RequireSameType(op, "kv", kv, "qkv", qkv);
  RequireFloat(op, "ctx", *ctx);
  RequireFloat(op, "lse", *lse);
  RequireNumel(op, "qkv", qkv, shape.batch * shape.seq * shape.qkv_width());
  RequireNumel(op, "kv", kv, shape.batch * key_rows * shape.kv_width());
  RequireNumel(op, "ctx", *ctx, shape.batch * shape.seq * shape.context_width());
  RequireNumel(op, "lse", *lse, shape.batch * shape.heads() * shape.seq);
  const cuda::AttentionBlockArgs args = DeviceBlockArgs(op, shape, key_rows, mask, dropout);
  cuda::LaunchAttentionBlockForward(qkv.dtype(), args, qkv.raw(), kv.raw(), scale,
                                    DropoutArgsOf(op, dropout), first, ctx->data(), lse->data());
  Finish(op);
}

void CudaOps::AttentionBlockBackward(const AttentionShape& shape, int64_t key_rows,
                                     const AttentionMask& mask, const Tensor& qkv, const Tensor& kv,
                                     const Tensor& ctx, const Tensor& lse, const Tensor& dctx,
                                     float scale, const AttentionDropout& dropout, Tensor* dqkv,
                                     Tensor* dkv) const {
  const char* op = "AttentionBlockBackward";
  RequireAttentionShape(op, shape);
  RequireDevice(op, "qkv", qkv);
  RequireSameType(op, "kv", kv, "qkv", qkv);
  RequireSameType(op, "ctx", ctx, "qkv", qkv);
  RequireSameType(op, "dctx", dctx, "qkv", qkv);
  RequireSameType(op, "dqkv", *dqkv, "qkv", qkv);
  RequireFloat(op, "lse", lse);
  RequireFloat(op, "dkv", *dkv);
  RequireNumel(op, "kv", kv, shape.batch * key_rows * shape.kv_width());
  RequireNumel(op, "dkv", *dkv, kv.numel());
  RequireNumel(op, "dqkv", *dqkv, shape.batch * shape.seq * shape.qkv_width());
  RequireNumel(op, "lse", lse, shape.batch * shape.heads() * shape.seq);
  const cuda::AttentionBlockArgs args = DeviceBlockArgs(op, shape, key_rows, mask, dropout);
  Tensor row_dot = NewFloatActivation({shape.batch, shape.heads(), shape.seq});
  cuda::LaunchAttentionBlockBackward(qkv.dtype(), args, qkv.raw(), kv.raw(), ctx.raw(), lse.data(),
                                     dctx.raw(), scale, DropoutArgsOf(op, dropout), row_dot.data(),
                                     dqkv->raw(), dkv->data());
  Finish(op);
}

void CudaOps::EmbeddingForward(const Tensor& table, int64_t vocab_start,
                               absl::Span<const int32_t> ids, Tensor* out) const {
  const char* op = "EmbeddingForward";
  RequireDevice(op, "table", table);
  RequireDevice(op, "out", *out);
  REQUIRE(table.rank() == 2, op, Describe("table", table) + ": must be [rows, width]");
  const int64_t count = static_cast<int64_t>(ids.size());
  RequireNumel(op, "out", *out, count * table.dim(1));
  const int32_t* device_ids = ints_.Upload(ids.data(), count);
  cuda::LaunchEmbeddingForward(out->dtype(), table.dtype(), table.raw(), vocab_start, table.dim(0),
                               table.dim(1), device_ids, count, out->raw());
  Finish(op);
}

void CudaOps::EmbeddingBackwardWeight(const Tensor& dout, int64_t vocab_start,
                                      absl::Span<const int32_t> ids, Tensor* dtable) const {
  const char* op = "EmbeddingBackwardWeight";
  RequireDevice(op, "dout", dout);
  RequireFloat(op, "dtable", *dtable);
  REQUIRE(dtable->rank() == 2, op, Describe("dtable", *dtable) + ": must be [rows, width]");
  const int64_t count = static_cast<int64_t>(ids.size());
  RequireNumel(op, "dout", dout, count * dtable->dim(1));
  const cuda::EmbeddingGradPlan plan =
      cuda::PlanEmbeddingGrad(ids.data(), count, vocab_start, dtable->dim(0));
  const int32_t* packed =
      ints_.Upload(plan.packed.data(), static_cast<int64_t>(plan.packed.size()));
  cuda::LaunchEmbeddingBackwardWeight(dout.dtype(), dout.raw(), dtable->dim(1), packed,
                                      plan.num_rows, dtable->data());
  Finish(op);
}

void CudaOps::RowMax(const Tensor& logits, absl::Span<double> row_max) const {
  RequireDevice("RowMax", "logits", logits);
  REQUIRE(logits.rank() == 2, "RowMax", Describe("logits", logits) + ": must be [rows, vocab]");
  const int64_t rows = logits.dim(0);
  REQUIRE(static_cast<int64_t>(row_max.size()) == rows, "RowMax", "row_max size != rows");
  float* device_max = static_cast<float*>(floats_.Reserve(rows * sizeof(float)));
  cuda::LaunchRowMax(logits.dtype(), logits.raw(), rows, logits.dim(1), device_max);
  Finish("RowMax");
  std::vector<float> host(rows);
  floats_.Download(host.data(), rows);
  for (int64_t r = 0; r < rows; ++r) row_max[r] = host[r];
}

void CudaOps::SumExpAndTarget(const Tensor& logits, absl::Span<const int32_t> labels,
                              int64_t vocab_start, absl::Span<const double> row_max,
                              absl::Span<double> sum_exp, absl::Span<double> target) const {
  const char* op = "SumExpAndTarget";
  RequireDevice(op, "logits", logits);
  REQUIRE(logits.rank() == 2, op, Describe("logits", logits) + ": must be [rows, vocab]");
  const int64_t rows = logits.dim(0);
  REQUIRE(static_cast<int64_t>(labels.size()) == rows &&
              static_cast<int64_t>(row_max.size()) == rows &&
              static_cast<int64_t>(sum_exp.size()) == rows &&
              static_cast<int64_t>(target.size()) == rows,
          op, "labels, row_max, sum_exp and target must have one entry per row");
  // The CPU shifts by the fp32 rounding of the row max; so does the device.
  std::vector<float> max_f(row_max.begin(), row_max.end());
  const int32_t* device_labels = ints_.Upload(labels.data(), rows);
  const float* device_max = floats_.Upload(max_f.data(), rows);
  double* device_out = static_cast<double*>(doubles_.Reserve(2 * rows * sizeof(double)));
  cuda::LaunchSumExpAndTarget(logits.dtype(), logits.raw(), device_labels, rows, logits.dim(1),
                              vocab_start, device_max, device_out, device_out + rows);
  Finish(op);
  std::vector<double> host(2 * rows);
  doubles_.Download(host.data(), 2 * rows);
  std::copy(host.begin(), host.begin() + rows, sum_exp.begin());
  std::copy(host.begin() + rows, host.end(), target.begin());
}

void CudaOps::CrossEntropyBackward(absl::Span<const int32_t> labels,
                                   absl::Span<const float> logsumexp, int64_t vocab_start,
                                   float scale, absl::Span<const float> loss_mask,
                                   Tensor* logits) const {
  const char* op = "CrossEntropyBackward";
  RequireDevice(op, "logits", *logits);
  REQUIRE(logits->rank() == 2, op, Describe("logits", *logits) + ": must be [rows, vocab]");
  const int64_t rows = logits->dim(0);
  REQUIRE(
      static_cast<int64_t>(labels.size()) == rows && static_cast<int64_t>(logsumexp.size()) == rows,
      op, "labels and logsumexp must have one entry per row");
  REQUIRE(loss_mask.empty() || static_cast<int64_t>(loss_mask.size()) == rows, op,
          "the loss mask must be empty or have one entry per row");
  const int32_t* device_labels = ints_.Upload(labels.data(), rows);
  // One upload: [logsumexp | loss mask].
  std::vector<float> row_values(logsumexp.begin(), logsumexp.end());
  row_values.insert(row_values.end(), loss_mask.begin(), loss_mask.end());
  const float* device_lse =
      floats_.Upload(row_values.data(), static_cast<int64_t>(row_values.size()));
  cuda::LaunchCrossEntropyBackward(logits->dtype(), device_labels, device_lse,
                                   loss_mask.empty() ? nullptr : device_lse + rows, rows,
                                   logits->dim(1), vocab_start, scale, logits->raw());
  Finish(op);
}

// Mixture of experts' token movement (compile-checked; cuda_backend_test checks it against
// the CPU on a GPU machine). Each op uploads one index array (ints_) and at most one
// weight array (floats_).
void CudaOps::PermuteTokens(const Tensor& x, absl::Span<const int32_t> token_of_row,
                            absl::Span<const float> row_weight, Tensor* out) const {
  const char* op = "PermuteTokens";
  RequireDevice(op, "x", x);
  RequireSameType(op, "out", *out, "x", x);
  REQUIRE(x.rank() == 2, op, Describe("x", x) + ": must be [tokens, width]");
  const int64_t rows = static_cast<int64_t>(token_of_row.size()), width = x.dim(1);
  RequireNumel(op, "out", *out, rows * width);
  REQUIRE(row_weight.empty() || static_cast<int64_t>(row_weight.size()) == rows, op,
          "row_weight must be empty or have one entry per row");
  const int32_t* device_tokens = ints_.Upload(token_of_row.data(), rows);
  const float* device_weights =
      row_weight.empty() ? nullptr : floats_.Upload(row_weight.data(), rows);
  cuda::LaunchPermuteTokens(x.dtype(), x.raw(), width, device_tokens, device_weights, rows,
                            out->raw());
  Finish(op);
}

void CudaOps::UnpermuteTokens(const Tensor& permuted, absl::Span<const int32_t> row_of_slot,
                              absl::Span<const float> slot_weight, Tensor* out) const {
  const char* op = "UnpermuteTokens";
  RequireDevice(op, "permuted", permuted);
  RequireSameType(op, "out", *out, "permuted", permuted);
  REQUIRE(out->rank() == 2 && out->dim(0) > 0, op,
          Describe("out", *out) + ": must be [tokens, width]");
  const int64_t tokens = out->dim(0), width = out->dim(1);
  const int64_t slots = static_cast<int64_t>(row_of_slot.size());
  REQUIRE(slots % tokens == 0, op, "row_of_slot must hold topk entries per token");
  REQUIRE(slot_weight.empty() || static_cast<int64_t>(slot_weight.size()) == slots, op,
          "slot_weight must be empty or have one entry per slot");
  const int32_t* device_rows = ints_.Upload(row_of_slot.data(), slots);
  const float* device_weights =
      slot_weight.empty() ? nullptr : floats_.Upload(slot_weight.data(), slots);
  cuda::LaunchUnpermuteTokens(permuted.dtype(), permuted.raw(), width, device_rows, device_weights,
                              tokens, slots / tokens, out->raw());
  Finish(op);
}

void CudaOps::SlotDots(const Tensor& dy, const Tensor& permuted,
                       absl::Span<const int32_t> row_of_slot, absl::Span<float> out) const {
  const char* op = "SlotDots";
  RequireDevice(op, "dy", dy);
  RequireSameType(op, "permuted", permuted, "dy", dy);
  REQUIRE(dy.rank() == 2 && dy.dim(0) > 0, op, Describe("dy", dy) + ": must be [tokens, width]");
  const int64_t tokens = dy.dim(0), slots = static_cast<int64_t>(row_of_slot.size());
  REQUIRE(slots % tokens == 0 && static_cast<int64_t>(out.size()) == slots, op,
          "row_of_slot and out must hold topk entries per token");
  const int32_t* device_rows = ints_.Upload(row_of_slot.data(), slots);
  float* device_out = static_cast<float*>(floats_.Reserve(slots * sizeof(float)));
  cuda::LaunchSlotDots(dy.dtype(), dy.raw(), permuted.raw(), dy.dim(1), device_rows, tokens,
                       slots / tokens, device_out);
  Finish(op);
  floats_.Download(out.data(), slots);
}
}  // namespace conveyor
