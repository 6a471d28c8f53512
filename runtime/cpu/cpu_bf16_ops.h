// --bf16 on the CPU backend of a CPU with AVX-512 BF16: the GEMMs multiply the bf16
// activations and weight copies with the CPU's bf16 instructions and accumulate in fp32
// (runtime/cpu/bf16_gemm.h), as cuBLASLt does on a GPU, and apply their epilogues (bias,
// GELU, one rounding to bf16) to each tile of fp32 sums while it is in cache. The norms,
// the cross-entropy, dropout, the residual adds and the bias gradients read bf16 values a
// few rows at a time into cache-sized fp32 buffers (runtime/cpu/bf16_row_chunks.h) and
// round their results once, casts convert with AVX-512 and embedding lookups move bf16
// rows as they are, so all of these equal the emulation's (runtime/bf16_emulation_ops.h:
// bf16 in and out, fp32 inside) bit for bit; every other op is the emulation's. Master
// weights and gradients stay fp32, so weight gradients accumulate in fp32 straight from
// the kernel's sums.
//
// The GEMMs' results equal the emulation's up to the order of the fp32 additions: both
// multiply the same bf16 values exactly and add in fp32, and both round a bf16 output
// once. The linear layers' epilogues (bias, GELU) work on the fp32 sums before that one
// rounding, where the emulation rounds the product and then the sum, as a GPU's fused
// epilogue does.
#ifndef CONVEYOR_RUNTIME_CPU_CPU_BF16_OPS_H_
#define CONVEYOR_RUNTIME_CPU_CPU_BF16_OPS_H_

#include "runtime/bf16_emulation_ops.h"

namespace conveyor {

class CpuBf16Ops : public Bf16EmulationOps {
 public:
  // The process's bf16 CPU backend; only on a CPU with cpu::HasBf16Gemm().
  static const CpuBf16Ops& Get();

  // a and b of bf16 (the compute type) run on the bf16 kernel; c of fp32 receives its
  // fp32 results, c of bf16 them rounded once. Operands of fp32 go to the emulation.
  void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
            const Tensor& a, const Tensor& b, float beta, Tensor* c) const override;
  // The linear layers' GEMMs with their epilogues (bias, GELU, GELU's derivative) applied
  // to the fp32 sums and rounded once, in one threaded pass over the rows.
  void LinearForward(const Tensor& x, const Tensor& w, const Tensor* bias,
                     Tensor* y) const override;
  void LinearGeluForward(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor* pre,
                         Tensor* y) const override;
  void LinearGeluBackwardInput(const Tensor& dy, const Tensor& w, const Tensor& pre,
                               Tensor* dx) const override;
  void Cast(const Tensor& in, Tensor* out) const override;
  void EmbeddingForward(const Tensor& table, int64_t vocab_start, absl::Span<const int32_t> ids,
                        Tensor* out) const override;
  // dbias += the sums of dy's rows (the linear layers' LinearWeightGrad composition
  // calls it after its Gemm, which runs on the bf16 kernel into the fp32 dw).
  void AccumulateBiasGrad(const Tensor& dy, Tensor* dbias) const override;
  void NormForward(NormKind kind, const Tensor& x, const Tensor& gamma, const Tensor* beta,
                   float eps, Tensor* y, Tensor* mean, Tensor* rstd) const override;
  void NormBackwardInput(NormKind kind, const Tensor& dy, const Tensor& x, const Tensor& gamma,
                         const Tensor& mean, const Tensor& rstd, Tensor* dx) const override;
  void NormBackwardWeight(const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                          Tensor* dgamma, Tensor* dbeta) const override;
  void Dropout(const CounterRng& rng, float p, uint64_t first_index, const Tensor& in,
               Tensor* out) const override;
  // The cross-entropy over bf16 logits.
  void RowMaxSumExpAndTarget(const Tensor& logits, absl::Span<const int32_t> labels,
                             int64_t vocab_start, absl::Span<double> row_max,
                             absl::Span<double> sum_exp, absl::Span<double> target) const override;
  void CrossEntropyBackward(absl::Span<const int32_t> labels, absl::Span<const float> logsumexp,
                            int64_t vocab_start, float scale, absl::Span<const float> loss_mask,
                            Tensor* logits) const override;
  // The residual stream's adds (BiasDropoutAdd's when its dropout is 0), with the
  // emulation's roundings.
  void Add(const Tensor& x, Tensor* y) const override;
  void AddBias(const Tensor& bias, Tensor* y) const override;
  void BiasDropoutAdd(const Tensor* bias, const CounterRng& rng, float p, uint64_t first_index,
                      const Tensor& residual, Tensor* y) const override;

 private:
  CpuBf16Ops();
  // bf16 operands and output and an fp32 bias (or none): the fused paths above; anything
  // else goes to the emulation's composition.
  static bool Fusable(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& out);
  static void AddBiasAndResidual(const Tensor* bias, const Tensor* residual, Tensor* y);
};

}  // namespace conveyor

#endif  // CONVEYOR_RUNTIME_CPU_CPU_BF16_OPS_H_
