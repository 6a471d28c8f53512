#include "runtime/cpu/cpu_bf16_ops.h"

#include "runtime/cpu/bf16_gemm.h"
#include "runtime/cpu/cpu_ops.h"

namespace conveyor {

CpuBf16Ops::CpuBf16Ops() : Bf16EmulationOps(&CpuOps::Get()) {}

const CpuBf16Ops& CpuBf16Ops::Get() {
  static const CpuBf16Ops* ops = new CpuBf16Ops();
  return *ops;
}

void CpuBf16Ops::Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                      const Tensor& a, const Tensor& b, float beta, Tensor* c) const {
  if (a.dtype() != DType::kBFloat16 || b.dtype() != DType::kBFloat16) {
    Bf16EmulationOps::Gemm(trans_a, trans_b, m, n, k, alpha, a, b, beta, c);
    return;
  }
  const auto* pa = static_cast<const BFloat16*>(a.raw());
  const auto* pb = static_cast<const BFloat16*>(b.raw());
  const int64_t lda = trans_a ? m : k, ldb = trans_b ? k : n;
  if (c->dtype() == DType::kFloat32) {
    cpu::Bf16Gemm(trans_a, trans_b, m, n, k, alpha, pa, lda, pb, ldb, beta, c->data(), n);
    return;
  }
  // A bf16 output: alpha * (the fp32 sum) + beta * c in fp32, then one rounding to bf16.
  Tensor sums =
      beta != 0.0f ? CastTo(*c, DType::kFloat32)
                   : Tensor::Uninitialized(c->shape(), c->category(), DType::kFloat32, c->device());
  cpu::Bf16Gemm(trans_a, trans_b, m, n, k, alpha, pa, lda, pb, ldb, beta, sums.data(), n);
  Cast(sums, c);
}

}  // namespace conveyor
