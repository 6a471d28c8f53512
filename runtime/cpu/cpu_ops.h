// The CPU backend of the op interface: fp32 throughout, GEMMs through runtime/cpu/gemm.h. It is
// the reference every other backend is checked against, op by op.
#ifndef CONVEYOR_RUNTIME_CPU_CPU_OPS_H_
#define CONVEYOR_RUNTIME_CPU_CPU_OPS_H_

#include "runtime/ops.h"

namespace conveyor {

class CpuOps : public Ops {
 public:
  // The process's CPU backend (it has no state).
  static const CpuOps& Get();

  Device device() const override { return Device::kCpu; }
  DType compute_dtype() const override { return DType::kFloat32; }

  void Cast(const Tensor& in, Tensor* out) const override;
  void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
            const Tensor& a, const Tensor& b, float beta, Tensor* c) const override;
  void LinearForward(const Tensor& x, const Tensor& w, const Tensor* bias,
                     Tensor* y) const override;
  void LinearGeluForward(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor* pre,
                         Tensor* y) const override;
  void LinearGeluBackwardInput(const Tensor& dy, const Tensor& w, const Tensor& pre,
                               Tensor* dx) const override;
  void AddBias(const Tensor& bias, Tensor* y) const override;
  void AccumulateBiasGrad(const Tensor& dy, Tensor* dbias) const override;
  void Add(const Tensor& x, Tensor* y) const override;
  void AddPositionRows(const Tensor& table, absl::Span<const int32_t> positions,
                       Tensor* x) const override;
  void AccumulatePositionGrad(const Tensor& dx, absl::Span<const int32_t> positions,
                              Tensor* dtable) const override;
  void NormForward(NormKind kind, const Tensor& x, const Tensor& gamma, const Tensor* beta,
                   float eps, Tensor* y, Tensor* mean, Tensor* rstd) const override;
  void NormBackwardInput(NormKind kind, const Tensor& dy, const Tensor& x, const Tensor& gamma,
                         const Tensor& mean, const Tensor& rstd, Tensor* dx) const override;
  void NormBackwardWeight(const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                          Tensor* dgamma, Tensor* dbeta) const override;
  void GeluForward(const Tensor& x, Tensor* y) const override;
  void GeluBackward(const Tensor& x, const Tensor& dy, Tensor* dx) const override;
  void SwigluForward(const Tensor& x, Tensor* y) const override;
  void SwigluBackward(const Tensor& x, const Tensor& dy, Tensor* dx) const override;
  void SquaredReluForward(const Tensor& x, Tensor* y) const override;
  void SquaredReluBackward(const Tensor& x, const Tensor& dy, Tensor* dx) const override;
  void Dropout(const CounterRng& rng, float p, uint64_t first_index, const Tensor& in,
               Tensor* out) const override;
  void BiasDropoutAdd(const Tensor* bias, const CounterRng& rng, float p, uint64_t first_index,
                      const Tensor& residual, Tensor* y) const override;
  void CopyColumns(const Tensor& src, int64_t src_col, int64_t width, Tensor* dst,
                   int64_t dst_col) const override;
  void RotateQueriesAndKeys(const RopeTable& table, const AttentionShape& shape,
                            absl::Span<const int32_t> positions, bool inverse,
                            Tensor* qkv) const override;
  void AttentionForward(const AttentionShape& shape, const Tensor& qkv, float scale,
                        const AttentionDropout& dropout, const AttentionMask& mask, Tensor* saved,
                        Tensor* ctx) const override;
  void AttentionBackward(const AttentionShape& shape, const Tensor& qkv, const Tensor& saved,
                         const Tensor& ctx, const Tensor& dctx, float scale,
                         const AttentionDropout& dropout, const AttentionMask& mask,
                         Tensor* dqkv) const override;
  void PackKeysValues(const AttentionShape& shape, const Tensor& qkv, Tensor* kv) const override;
  void AddKeyValueGrad(const AttentionShape& shape, const Tensor& dkv, Tensor* dqkv) const override;
  void AttentionBlockForward(const AttentionShape& shape, int64_t key_rows,
                             const AttentionMask& mask, const Tensor& qkv, const Tensor& kv,
                             float scale, const AttentionDropout& dropout, bool first, Tensor* ctx,
                             Tensor* lse) const override;
  void AttentionBlockBackward(const AttentionShape& shape, int64_t key_rows,
                              const AttentionMask& mask, const Tensor& qkv, const Tensor& kv,
                              const Tensor& ctx, const Tensor& lse, const Tensor& dctx, float scale,
                              const AttentionDropout& dropout, Tensor* dqkv,
                              Tensor* dkv) const override;
  void EmbeddingForward(const Tensor& table, int64_t vocab_start, absl::Span<const int32_t> ids,
                        Tensor* out) const override;
  void EmbeddingBackwardWeight(const Tensor& dout, int64_t vocab_start,
                               absl::Span<const int32_t> ids, Tensor* dtable) const override;
  void RowMax(const Tensor& logits, absl::Span<double> row_max) const override;
  void SumExpAndTarget(const Tensor& logits, absl::Span<const int32_t> labels, int64_t vocab_start,
                       absl::Span<const double> row_max, absl::Span<double> sum_exp,
                       absl::Span<double> target) const override;
  void RowMaxSumExpAndTarget(const Tensor& logits, absl::Span<const int32_t> labels,
                             int64_t vocab_start, absl::Span<double> row_max,
                             absl::Span<double> sum_exp, absl::Span<double> target) const override;
  void CrossEntropyBackward(absl::Span<const int32_t> labels, absl::Span<const float> logsumexp,
                            int64_t vocab_start, float scale, absl::Span<const float> loss_mask,
                            Tensor* logits) const override;
  void PermuteTokens(const Tensor& x, absl::Span<const int32_t> token_of_row,
                     absl::Span<const float> row_weight, Tensor* out) const override;
  void UnpermuteTokens(const Tensor& permuted, absl::Span<const int32_t> row_of_slot,
                       absl::Span<const float> slot_weight, Tensor* out) const override;
  void SlotDots(const Tensor& dy, const Tensor& permuted, absl::Span<const int32_t> row_of_slot,
                absl::Span<float> out) const override;
};

}  // namespace conveyor

#endif  // CONVEYOR_RUNTIME_CPU_CPU_OPS_H_
