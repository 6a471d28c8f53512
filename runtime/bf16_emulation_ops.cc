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

void Bf16EmulationOps::AddPositionRows(const Tensor& table, int64_t first_row, int64_t seq,
                                       Tensor* x) const {
  Into(x, true, [&](Tensor* w) { fp32_.AddPositionRows(Wide(table), first_row, seq, w); });
}

void Bf16EmulationOps::AccumulatePositionGrad(const Tensor& dx, int64_t first_row, int64_t seq,
                                              Tensor* dtable) const {
  Into(dtable, true, [&](Tensor* w) { fp32_.AccumulatePositionGrad(Wide(dx), first_row, seq, w); });
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

void Bf16EmulationOps::RotateQueriesAndKeys(const RopeTable& table, const AttentionShape& shape,
                                            bool inverse, Tensor* qkv) const {
  Into(qkv, true, [&](Tensor* w) { fp32_.RotateQueriesAndKeys(table, shape, inverse, w); });
}

void Bf16EmulationOps::AttentionForward(const AttentionShape& shape, const Tensor& qkv, float scale,
                                        const AttentionDropout& dropout, Tensor* saved,
                                        Tensor* ctx) const {
  Into(ctx, false,
       [&](Tensor* w) { fp32_.AttentionForward(shape, Wide(qkv), scale, dropout, saved, w); });
}

void Bf16EmulationOps::AttentionBackward(const AttentionShape& shape, const Tensor& qkv,
                                         const Tensor& saved, const Tensor& ctx, const Tensor& dctx,
                                         float scale, const AttentionDropout& dropout,
                                         Tensor* dqkv) const {
  Into(dqkv, false, [&](Tensor* w) {
    fp32_.AttentionBackward(shape, Wide(qkv), saved, Wide(ctx), Wide(dctx), scale, dropout, w);
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

void Bf16EmulationOps::CrossEntropyBackward(absl::Span<const int32_t> labels,
                                            absl::Span<const float> logsumexp, int64_t vocab_start,
                                            float scale, Tensor* logits) const {
  Into(logits, true,
       [&](Tensor* w) { fp32_.CrossEntropyBackward(labels, logsumexp, vocab_start, scale, w); });
}

}  // namespace conveyor
