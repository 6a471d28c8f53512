#include "runtime/bf16_emulation_ops.h"

namespace conveyor {

Tensor Bf16EmulationOps::Wide(const Tensor& t) const { return fp32_.CastTo(t, DType::kFloat32); }

template <typename Op>
void Bf16EmulationOps::Into(Tensor* out, bool reads, Op op) const {
  if (out->dtype() == DType::kFloat32) {
    op(out);
    return;
  }
  Tensor wide = reads
                    ? Wide(*out)
                    : Tensor::Zeros(out->shape(), out->category(), DType::kFloat32, out->device());
  op(&wide);
  fp32_.Cast(wide, out);
}

void Bf16EmulationOps::Cast(const Tensor& in, Tensor* out) const { fp32_.Cast(in, out); }

void Bf16EmulationOps::Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                            float alpha, const Tensor& a, const Tensor& b, float beta,
                            Tensor* c) const {
  Into(c, beta != 0.0f,
       [&](Tensor* w) { fp32_.Gemm(trans_a, trans_b, m, n, k, alpha, Wide(a), Wide(b), beta, w); });
}

void Bf16EmulationOps::AddBias(const Tensor& bias, Tensor* y) const {
  Into(y, true, [&](Tensor* w) { fp32_.AddBias(Wide(bias), w); });
}

void Bf16EmulationOps::AccumulateBiasGrad(const Tensor& dy, Tensor* dbias) const {
  Into(dbias, true, [&](Tensor* w) { fp32_.AccumulateBiasGrad(Wide(dy), w); });
}

void Bf16EmulationOps::Add(const Tensor& x, Tensor* y) const {
  Into(y, true, [&](Tensor* w) { fp32_.Add(Wide(x), w); });
}

void Bf16EmulationOps::AddPositionRows(const Tensor& table, absl::Span<const int32_t> positions,
                                       Tensor* x) const {
  Into(x, true, [&](Tensor* w) { fp32_.AddPositionRows(Wide(table), positions, w); });
}

void Bf16EmulationOps::AccumulatePositionGrad(const Tensor& dx,
                                              absl::Span<const int32_t> positions,
                                              Tensor* dtable) const {
  Into(dtable, true, [&](Tensor* w) { fp32_.AccumulatePositionGrad(Wide(dx), positions, w); });
}

void Bf16EmulationOps::NormForward(NormKind kind, const Tensor& x, const Tensor& gamma,
                                   const Tensor* beta, float eps, Tensor* y, Tensor* mean,
                                   Tensor* rstd) const {
  const Tensor wide_beta = beta != nullptr ? Wide(*beta) : Tensor();
  Into(y, false, [&](Tensor* w) {
    fp32_.NormForward(kind, Wide(x), Wide(gamma), beta != nullptr ? &wide_beta : nullptr, eps, w,
                      mean, rstd);
  });
}

void Bf16EmulationOps::NormBackwardInput(NormKind kind, const Tensor& dy, const Tensor& x,
                                         const Tensor& gamma, const Tensor& mean,
                                         const Tensor& rstd, Tensor* dx) const {
  Into(dx, false, [&](Tensor* w) {
    fp32_.NormBackwardInput(kind, Wide(dy), Wide(x), Wide(gamma), mean, rstd, w);
  });
}

void Bf16EmulationOps::NormBackwardWeight(const Tensor& dy, const Tensor& x, const Tensor& mean,
                                          const Tensor& rstd, Tensor* dgamma, Tensor* dbeta) const {
  // Weight gradients are fp32 (runtime/ops.h).
  fp32_.NormBackwardWeight(Wide(dy), Wide(x), mean, rstd, dgamma, dbeta);
}

void Bf16EmulationOps::GeluForward(const Tensor& x, Tensor* y) const {
  Into(y, false, [&](Tensor* w) { fp32_.GeluForward(Wide(x), w); });
}

void Bf16EmulationOps::GeluBackward(const Tensor& x, const Tensor& dy, Tensor* dx) const {
  Into(dx, false, [&](Tensor* w) { fp32_.GeluBackward(Wide(x), Wide(dy), w); });
}

void Bf16EmulationOps::SquaredReluForward(const Tensor& x, Tensor* y) const {
  Into(y, false, [&](Tensor* w) { fp32_.SquaredReluForward(Wide(x), w); });
}

void Bf16EmulationOps::SquaredReluBackward(const Tensor& x, const Tensor& dy, Tensor* dx) const {
  Into(dx, false, [&](Tensor* w) { fp32_.SquaredReluBackward(Wide(x), Wide(dy), w); });
}

void Bf16EmulationOps::SwigluForward(const Tensor& x, Tensor* y) const {
  Into(y, false, [&](Tensor* w) { fp32_.SwigluForward(Wide(x), w); });
}

void Bf16EmulationOps::SwigluBackward(const Tensor& x, const Tensor& dy, Tensor* dx) const {
  Into(dx, false, [&](Tensor* w) { fp32_.SwigluBackward(Wide(x), Wide(dy), w); });
}

void Bf16EmulationOps::Dropout(const CounterRng& rng, float p, uint64_t first_index,
                               const Tensor& in, Tensor* out) const {
  const Tensor wide_in = Wide(in);  // before `out` (which may be `in`) is written
  Into(out, false, [&](Tensor* w) { fp32_.Dropout(rng, p, first_index, wide_in, w); });
}

void Bf16EmulationOps::CopyColumns(const Tensor& src, int64_t src_col, int64_t width, Tensor* dst,
                                   int64_t dst_col) const {
  fp32_.CopyColumns(src, src_col, width, dst, dst_col);  // moves bytes of any dtype
}

void Bf16EmulationOps::RotateQueriesAndKeys(const RopeTable& table, const AttentionShape& shape,
                                            absl::Span<const int32_t> positions, bool inverse,
                                            Tensor* qkv) const {
  Into(qkv, true,
       [&](Tensor* w) { fp32_.RotateQueriesAndKeys(table, shape, positions, inverse, w); });
}

void Bf16EmulationOps::AttentionForward(const AttentionShape& shape, const Tensor& qkv, float scale,
                                        const AttentionDropout& dropout, const AttentionMask& mask,
                                        Tensor* saved, Tensor* ctx) const {
  Into(ctx, false, [&](Tensor* w) {
    fp32_.AttentionForward(shape, Wide(qkv), scale, dropout, mask, saved, w);
  });
}

void Bf16EmulationOps::AttentionBackward(const AttentionShape& shape, const Tensor& qkv,
                                         const Tensor& saved, const Tensor& ctx, const Tensor& dctx,
                                         float scale, const AttentionDropout& dropout,
                                         const AttentionMask& mask, Tensor* dqkv) const {
  Into(dqkv, false, [&](Tensor* w) {
    fp32_.AttentionBackward(shape, Wide(qkv), saved, Wide(ctx), Wide(dctx), scale, dropout, mask,
                            w);
  });
}

void Bf16EmulationOps::PackKeysValues(const AttentionShape& shape, const Tensor& qkv,
                                      Tensor* kv) const {
  Into(kv, false, [&](Tensor* w) { fp32_.PackKeysValues(shape, Wide(qkv), w); });
}

void Bf16EmulationOps::AddKeyValueGrad(const AttentionShape& shape, const Tensor& dkv,
                                       Tensor* dqkv) const {
  Into(dqkv, true, [&](Tensor* w) { fp32_.AddKeyValueGrad(shape, dkv, w); });
}

void Bf16EmulationOps::AttentionBlockForward(const AttentionShape& shape, int64_t key_rows,
                                             const AttentionMask& mask, const Tensor& qkv,
                                             const Tensor& kv, float scale,
                                             const AttentionDropout& dropout, bool first,
                                             Tensor* ctx, Tensor* lse) const {
  fp32_.AttentionBlockForward(shape, key_rows, mask, Wide(qkv), Wide(kv), scale, dropout, first,
                              ctx, lse);
}

void Bf16EmulationOps::AttentionBlockBackward(const AttentionShape& shape, int64_t key_rows,
                                              const AttentionMask& mask, const Tensor& qkv,
                                              const Tensor& kv, const Tensor& ctx,
                                              const Tensor& lse, const Tensor& dctx, float scale,
                                              const AttentionDropout& dropout, Tensor* dqkv,
                                              Tensor* dkv) const {
  Into(dqkv, true, [&](Tensor* w) {
    fp32_.AttentionBlockBackward(shape, key_rows, mask, Wide(qkv), Wide(kv), Wide(ctx), lse,
                                 Wide(dctx), scale, dropout, w, dkv);
  });
}

void Bf16EmulationOps::EmbeddingForward(const Tensor& table, int64_t vocab_start,
                                        absl::Span<const int32_t> ids, Tensor* out) const {
  Into(out, false, [&](Tensor* w) { fp32_.EmbeddingForward(Wide(table), vocab_start, ids, w); });
}

void Bf16EmulationOps::EmbeddingBackwardWeight(const Tensor& dout, int64_t vocab_start,
                                               absl::Span<const int32_t> ids,
                                               Tensor* dtable) const {
  fp32_.EmbeddingBackwardWeight(Wide(dout), vocab_start, ids, dtable);
}

void Bf16EmulationOps::RowMax(const Tensor& logits, absl::Span<double> row_max) const {
  fp32_.RowMax(Wide(logits), row_max);
}

void Bf16EmulationOps::SumExpAndTarget(const Tensor& logits, absl::Span<const int32_t> labels,
                                       int64_t vocab_start, absl::Span<const double> row_max,
                                       absl::Span<double> sum_exp,
                                       absl::Span<double> target) const {
  fp32_.SumExpAndTarget(Wide(logits), labels, vocab_start, row_max, sum_exp, target);
}

void Bf16EmulationOps::RowMaxSumExpAndTarget(const Tensor& logits,
                                             absl::Span<const int32_t> labels,
                                             int64_t vocab_start, absl::Span<double> row_max,
                                             absl::Span<double> sum_exp,
                                             absl::Span<double> target) const {
  fp32_.RowMaxSumExpAndTarget(Wide(logits), labels, vocab_start, row_max, sum_exp, target);
}

void Bf16EmulationOps::CrossEntropyBackward(absl::Span<const int32_t> labels,
                                            absl::Span<const float> logsumexp, int64_t vocab_start,
                                            float scale, absl::Span<const float> loss_mask,
                                            Tensor* logits) const {
  Into(logits, true, [&](Tensor* w) {
    fp32_.CrossEntropyBackward(labels, logsumexp, vocab_start, scale, loss_mask, w);
  });
}


void Bf16EmulationOps::PermuteTokens(const Tensor& x, absl::Span<const int32_t> token_of_row,
                                     absl::Span<const float> row_weight, Tensor* out) const {
  Into(out, false, [&](Tensor* w) { fp32_.PermuteTokens(Wide(x), token_of_row, row_weight, w); });
}

void Bf16EmulationOps::UnpermuteTokens(const Tensor& permuted,
                                       absl::Span<const int32_t> row_of_slot,
                                       absl::Span<const float> slot_weight, Tensor* out) const {
  Into(out, false,
       [&](Tensor* w) { fp32_.UnpermuteTokens(Wide(permuted), row_of_slot, slot_weight, w); });
}

void Bf16EmulationOps::SlotDots(const Tensor& dy, const Tensor& permuted,
                                absl::Span<const int32_t> row_of_slot,
                                absl::Span<float> out) const {
  fp32_.SlotDots(Wide(dy), Wide(permuted), row_of_slot, out);
}
}  // namespace conveyor
