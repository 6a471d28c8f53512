#include "trainer/reporting/profiling_ops.h"

#include "absl/strings/str_format.h"
#include "profiler/recorder.h"

namespace conveyor::profiler {

void ProfilingOps::Cast(const Tensor& in, Tensor* out) const {
  const Scope span("op", "Cast");
  inner_->Cast(in, out);
}

void ProfilingOps::Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                        const Tensor& a, const Tensor& b, float beta, Tensor* c) const {
  // The GEMM's size: 2*m*n*k FLOPs.
  const Scope span("op", "Gemm",
                   Recorder::Global().active()
                       ? absl::StrFormat("\"m\": %d, \"n\": %d, \"k\": %d", m, n, k)
                       : std::string());
  inner_->Gemm(trans_a, trans_b, m, n, k, alpha, a, b, beta, c);
}

void ProfilingOps::LinearForward(const Tensor& x, const Tensor& w, const Tensor* bias,
                                 Tensor* y) const {
  const Scope span("op", "LinearForward");
  inner_->LinearForward(x, w, bias, y);
}

void ProfilingOps::LinearGeluForward(const Tensor& x, const Tensor& w, const Tensor* bias,
                                     Tensor* pre, Tensor* y) const {
  const Scope span("op", "LinearGeluForward");
  inner_->LinearGeluForward(x, w, bias, pre, y);
}

void ProfilingOps::LinearGeluBackwardInput(const Tensor& dy, const Tensor& w, const Tensor& pre,
                                           Tensor* dx) const {
  const Scope span("op", "LinearGeluBackwardInput");
  inner_->LinearGeluBackwardInput(dy, w, pre, dx);
}

void ProfilingOps::LinearWeightGrad(const Tensor& x, const Tensor& dy, Tensor* dw,
                                    Tensor* dbias) const {
  const Scope span("op", "LinearWeightGrad");
  inner_->LinearWeightGrad(x, dy, dw, dbias);
}

void ProfilingOps::AddBias(const Tensor& bias, Tensor* y) const {
  const Scope span("op", "AddBias");
  inner_->AddBias(bias, y);
}

void ProfilingOps::AccumulateBiasGrad(const Tensor& dy, Tensor* dbias) const {
  const Scope span("op", "AccumulateBiasGrad");
  inner_->AccumulateBiasGrad(dy, dbias);
}

void ProfilingOps::Add(const Tensor& x, Tensor* y) const {
  const Scope span("op", "Add");
  inner_->Add(x, y);
}

void ProfilingOps::AddPositionRows(const Tensor& table, absl::Span<const int32_t> positions,
                                   Tensor* x) const {
  const Scope span("op", "AddPositionRows");
  inner_->AddPositionRows(table, positions, x);
}

void ProfilingOps::AccumulatePositionGrad(const Tensor& dx, absl::Span<const int32_t> positions,
                                          Tensor* dtable) const {
  const Scope span("op", "AccumulatePositionGrad");
  inner_->AccumulatePositionGrad(dx, positions, dtable);
}

void ProfilingOps::NormForward(NormKind kind, const Tensor& x, const Tensor& gamma,
                               const Tensor* beta, float eps, Tensor* y, Tensor* mean,
                               Tensor* rstd) const {
  const Scope span("op", "NormForward");
  inner_->NormForward(kind, x, gamma, beta, eps, y, mean, rstd);
}

void ProfilingOps::NormBackwardInput(NormKind kind, const Tensor& dy, const Tensor& x,
                                     const Tensor& gamma, const Tensor& mean, const Tensor& rstd,
                                     Tensor* dx) const {
  const Scope span("op", "NormBackwardInput");
  inner_->NormBackwardInput(kind, dy, x, gamma, mean, rstd, dx);
}

void ProfilingOps::NormBackwardWeight(const Tensor& dy, const Tensor& x, const Tensor& mean,
                                      const Tensor& rstd, Tensor* dgamma, Tensor* dbeta) const {
  const Scope span("op", "NormBackwardWeight");
  inner_->NormBackwardWeight(dy, x, mean, rstd, dgamma, dbeta);
}

void ProfilingOps::GeluForward(const Tensor& x, Tensor* y) const {
  const Scope span("op", "GeluForward");
  inner_->GeluForward(x, y);
}

void ProfilingOps::GeluBackward(const Tensor& x, const Tensor& dy, Tensor* dx) const {
  const Scope span("op", "GeluBackward");
  inner_->GeluBackward(x, dy, dx);
}

void ProfilingOps::SquaredReluForward(const Tensor& x, Tensor* y) const {
  const Scope span("op", "SquaredReluForward");
  inner_->SquaredReluForward(x, y);
}

void ProfilingOps::SquaredReluBackward(const Tensor& x, const Tensor& dy, Tensor* dx) const {
  const Scope span("op", "SquaredReluBackward");
  inner_->SquaredReluBackward(x, dy, dx);
}

void ProfilingOps::SwigluForward(const Tensor& x, Tensor* y) const {
  const Scope span("op", "SwigluForward");
  inner_->SwigluForward(x, y);
}

void ProfilingOps::SwigluBackward(const Tensor& x, const Tensor& dy, Tensor* dx) const {
  const Scope span("op", "SwigluBackward");
  inner_->SwigluBackward(x, dy, dx);
}

void ProfilingOps::Dropout(const CounterRng& rng, float p, uint64_t first_index, const Tensor& in,
                           Tensor* out) const {
  const Scope span("op", "Dropout");
  inner_->Dropout(rng, p, first_index, in, out);
}

void ProfilingOps::BiasDropoutAdd(const Tensor* bias, const CounterRng& rng, float p,
                                  uint64_t first_index, const Tensor& residual, Tensor* y) const {
  const Scope span("op", "BiasDropoutAdd");
  inner_->BiasDropoutAdd(bias, rng, p, first_index, residual, y);
}

void ProfilingOps::CopyColumns(const Tensor& src, int64_t src_col, int64_t width, Tensor* dst,
                               int64_t dst_col) const {
  const Scope span("op", "CopyColumns");
  inner_->CopyColumns(src, src_col, width, dst, dst_col);
}

void ProfilingOps::RotateQueriesAndKeys(const RopeTable& table, const AttentionShape& shape,
                                        absl::Span<const int32_t> positions, bool inverse,
                                        Tensor* qkv) const {
  const Scope span("op", "RotateQueriesAndKeys");
  inner_->RotateQueriesAndKeys(table, shape, positions, inverse, qkv);
}

void ProfilingOps::AttentionForward(const AttentionShape& shape, const Tensor& qkv, float scale,
                                    const AttentionDropout& dropout, const AttentionMask& mask,
                                    Tensor* saved, Tensor* ctx) const {
  const Scope span("op", "AttentionForward");
  inner_->AttentionForward(shape, qkv, scale, dropout, mask, saved, ctx);
}

void ProfilingOps::AttentionBackward(const AttentionShape& shape, const Tensor& qkv,
                                     const Tensor& saved, const Tensor& ctx, const Tensor& dctx,
                                     float scale, const AttentionDropout& dropout,
                                     const AttentionMask& mask, Tensor* dqkv) const {
  const Scope span("op", "AttentionBackward");
  inner_->AttentionBackward(shape, qkv, saved, ctx, dctx, scale, dropout, mask, dqkv);
}

void ProfilingOps::PackKeysValues(const AttentionShape& shape, const Tensor& qkv,
                                  Tensor* kv) const {
  const Scope span("op", "PackKeysValues");
  inner_->PackKeysValues(shape, qkv, kv);
}

void ProfilingOps::AddKeyValueGrad(const AttentionShape& shape, const Tensor& dkv,
                                   Tensor* dqkv) const {
  const Scope span("op", "AddKeyValueGrad");
  inner_->AddKeyValueGrad(shape, dkv, dqkv);
}

void ProfilingOps::AttentionBlockForward(const AttentionShape& shape, int64_t key_rows,
                                         const AttentionMask& mask, const Tensor& qkv,
                                         const Tensor& kv, float scale,
                                         const AttentionDropout& dropout, bool first, Tensor* ctx,
                                         Tensor* lse) const {
  const Scope span("op", "AttentionBlockForward");
  inner_->AttentionBlockForward(shape, key_rows, mask, qkv, kv, scale, dropout, first, ctx, lse);
}

void ProfilingOps::AttentionBlockBackward(const AttentionShape& shape, int64_t key_rows,
                                          const AttentionMask& mask, const Tensor& qkv,
                                          const Tensor& kv, const Tensor& ctx, const Tensor& lse,
                                          const Tensor& dctx, float scale,
                                          const AttentionDropout& dropout, Tensor* dqkv,
                                          Tensor* dkv) const {
  const Scope span("op", "AttentionBlockBackward");
  inner_->AttentionBlockBackward(shape, key_rows, mask, qkv, kv, ctx, lse, dctx, scale, dropout,
                                 dqkv, dkv);
}

void ProfilingOps::EmbeddingForward(const Tensor& table, int64_t vocab_start,
                                    absl::Span<const int32_t> ids, Tensor* out) const {
  const Scope span("op", "EmbeddingForward");
  inner_->EmbeddingForward(table, vocab_start, ids, out);
}

void ProfilingOps::EmbeddingBackwardWeight(const Tensor& dout, int64_t vocab_start,
                                           absl::Span<const int32_t> ids, Tensor* dtable) const {
  const Scope span("op", "EmbeddingBackwardWeight");
  inner_->EmbeddingBackwardWeight(dout, vocab_start, ids, dtable);
}

void ProfilingOps::RowMax(const Tensor& logits, absl::Span<double> row_max) const {
  const Scope span("op", "RowMax");
  inner_->RowMax(logits, row_max);
}

void ProfilingOps::SumExpAndTarget(const Tensor& logits, absl::Span<const int32_t> labels,
                                   int64_t vocab_start, absl::Span<const double> row_max,
                                   absl::Span<double> sum_exp, absl::Span<double> target) const {
  const Scope span("op", "SumExpAndTarget");
  inner_->SumExpAndTarget(logits, labels, vocab_start, row_max, sum_exp, target);
}

void ProfilingOps::RowMaxSumExpAndTarget(const Tensor& logits, absl::Span<const int32_t> labels,
                                         int64_t vocab_start, absl::Span<double> row_max,
                                         absl::Span<double> sum_exp,
                                         absl::Span<double> target) const {
  const Scope span("op", "RowMaxSumExpAndTarget");
  inner_->RowMaxSumExpAndTarget(logits, labels, vocab_start, row_max, sum_exp, target);
}

void ProfilingOps::CrossEntropyBackward(absl::Span<const int32_t> labels,
                                        absl::Span<const float> logsumexp, int64_t vocab_start,
                                        float scale, absl::Span<const float> loss_mask,
                                        Tensor* logits) const {
  const Scope span("op", "CrossEntropyBackward");
  inner_->CrossEntropyBackward(labels, logsumexp, vocab_start, scale, loss_mask, logits);
}


void ProfilingOps::PermuteTokens(const Tensor& x, absl::Span<const int32_t> token_of_row,
                                 absl::Span<const float> row_weight, Tensor* out) const {
  const Scope span("op", "PermuteTokens");
  inner_->PermuteTokens(x, token_of_row, row_weight, out);
}

void ProfilingOps::UnpermuteTokens(const Tensor& permuted, absl::Span<const int32_t> row_of_slot,
                                   absl::Span<const float> slot_weight, Tensor* out) const {
  const Scope span("op", "UnpermuteTokens");
  inner_->UnpermuteTokens(permuted, row_of_slot, slot_weight, out);
}

void ProfilingOps::SlotDots(const Tensor& dy, const Tensor& permuted,
                            absl::Span<const int32_t> row_of_slot, absl::Span<float> out) const {
  const Scope span("op", "SlotDots");
  inner_->SlotDots(dy, permuted, row_of_slot, out);
}
}  // namespace conveyor::profiler
