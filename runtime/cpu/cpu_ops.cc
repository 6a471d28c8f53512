#include "runtime/cpu/cpu_ops.h"

#include <algorithm>
#include <cassert>
#include <cstring>

#include "runtime/cpu/activation.h"
#include "runtime/cpu/attention.h"
#include "runtime/cpu/cross_entropy.h"
#include "runtime/cpu/dropout.h"
#include "runtime/cpu/embedding.h"
#include "runtime/cpu/gemm.h"
#include "runtime/cpu/gemm_tiles.h"
#include "runtime/cpu/moe_tokens.h"
#include "runtime/cpu/norm.h"
#include "runtime/cpu/rope.h"
#include "runtime/cpu/thread_pool.h"
#include "runtime/cpu/vector_math.h"

namespace conveyor {
namespace {

using cpu::ParallelFor;

int64_t Rows(const Tensor& t, int64_t width) { return t.numel() / width; }

// Elements per pool task (64 KB of fp32): enough work to outweigh waking a thread.
constexpr int64_t kElementGrain = 1 << 14;
int64_t RowGrain(int64_t width) { return std::max<int64_t>(1, kElementGrain / width); }

// y[i] += x[i].
CONVEYOR_VECTOR_CLONES
void AddTo(const float* x, int64_t n, float* y) {
  cpu::MapLanes(n, y, [&](int64_t i) { return y[i] + x[i]; });
}

// A tile of y += the bias's columns; then, when `gelu` is not null, the same elements of
// gelu (laid out as y, which starts at `y`) = GELU(y's), each row while it is in L1.
void AddBiasTile(const float* bias, const cpu::GemmTile& tile, const float* y, float* gelu) {
  for (int64_t i = 0; i < tile.rows; ++i) {
    float* row = tile.values + i * tile.ld;
    if (bias != nullptr) AddTo(bias + tile.col, tile.cols, row);
    if (gelu != nullptr) cpu::GeluForward(row, tile.cols, gelu + (row - y));
  }
}

}  // namespace

const CpuOps& CpuOps::Get() {
  static const CpuOps* ops = new CpuOps();
  return *ops;
}

void CpuOps::Cast(const Tensor& in, Tensor* out) const {
  assert(in.numel() == out->numel());
  if (in.dtype() == out->dtype()) {
    out->CopyFrom(in);
    return;
  }
  ParallelFor(in.numel(), kElementGrain, [&](int64_t begin, int64_t end) {
    if (in.dtype() == DType::kFloat32) {
      const float* src = in.data();
      auto* dst = static_cast<BFloat16*>(out->raw());
      for (int64_t i = begin; i < end; ++i) dst[i] = ToBFloat16(src[i]);
    } else {
      const auto* src = static_cast<const BFloat16*>(in.raw());
      float* dst = out->data();
      for (int64_t i = begin; i < end; ++i) dst[i] = ToFloat(src[i]);
    }
  });
}

void CpuOps::Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                  const Tensor& a, const Tensor& b, float beta, Tensor* c) const {
  cpu::Gemm(trans_a, trans_b, m, n, k, alpha, a.data(), b.data(), beta, c->data());
}

// The GEMMs below apply their bias and activation to each tile of their output as the
// tile is finished (runtime/cpu/gemm.h's GemmThen), while it is in L2, instead of in a
// second pass over the output in memory.
void CpuOps::LinearForward(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor* y) const {
  const float* b = bias != nullptr ? bias->data() : nullptr;
  cpu::GemmThen(false, true, x.dim(0), w.dim(0), w.dim(1), 1.0f, x.data(), w.data(), 0.0f,
                y->data(), [&](const cpu::GemmTile& tile) {
                  if (b != nullptr) AddBiasTile(b, tile, y->data(), nullptr);
                });
}

void CpuOps::LinearGeluForward(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor* pre,
                               Tensor* y) const {
  const float* b = bias != nullptr ? bias->data() : nullptr;
  cpu::GemmThen(false, true, x.dim(0), w.dim(0), w.dim(1), 1.0f, x.data(), w.data(), 0.0f,
                pre->data(), [&](const cpu::GemmTile& tile) {
                  AddBiasTile(b, tile, pre->data(), y->data());
                });
}

// The GEMM into dx itself, GELU's derivative applied to each tile in place (no [rows, in]
// temporary).
void CpuOps::LinearGeluBackwardInput(const Tensor& dy, const Tensor& w, const Tensor& pre,
                                     Tensor* dx) const {
  cpu::GemmThen(false, false, dy.dim(0), w.dim(1), w.dim(0), 1.0f, dy.data(), w.data(), 0.0f,
                dx->data(), [&](const cpu::GemmTile& tile) {
                  for (int64_t i = 0; i < tile.rows; ++i) {
                    float* row = tile.values + i * tile.ld;
                    cpu::GeluBackward(pre.data() + (row - dx->data()), row, tile.cols, row);
                  }
                });
}

void CpuOps::AddBias(const Tensor& bias, Tensor* y) const {
  const int64_t width = bias.numel();
  ParallelFor(Rows(*y, width), RowGrain(width), [&](int64_t begin, int64_t end) {
    const cpu::GemmTile rows{begin, 0, end - begin, width, y->data() + begin * width, width};
    AddBiasTile(bias.data(), rows, y->data(), nullptr);
  });
}

void CpuOps::AccumulateBiasGrad(const Tensor& dy, Tensor* dbias) const {
  const int64_t width = dbias->numel();
  const float* g = dy.data();
  float* db = dbias->data();
  // Split by columns: each sum still adds its rows in order, whatever the threads.
  ParallelFor(width, cpu::kLanes, [&](int64_t begin, int64_t end) {
    for (int64_t r = 0; r < Rows(dy, width); ++r) {
      AddTo(g + r * width + begin, end - begin, db + begin);
    }
  });
}

void CpuOps::Add(const Tensor& x, Tensor* y) const {
  ParallelFor(x.numel(), kElementGrain, [&](int64_t begin, int64_t end) {
    AddTo(x.data() + begin, end - begin, y->data() + begin);
  });
}

void CpuOps::AddPositionRows(const Tensor& table, absl::Span<const int32_t> positions,
                             Tensor* x) const {
  const int64_t width = table.dim(1);
  ParallelFor(Rows(*x, width), RowGrain(width), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      AddTo(table.data() + int64_t{positions[r]} * width, width, x->data() + r * width);
    }
  });
}

void CpuOps::AccumulatePositionGrad(const Tensor& dx, absl::Span<const int32_t> positions,
                                    Tensor* dtable) const {
  // The position table's gradient is an embedding gradient with positions for ids.
  EmbeddingBackwardWeight(dx, /*vocab_start=*/0, positions, dtable);
}

void CpuOps::NormForward(NormKind kind, const Tensor& x, const Tensor& gamma, const Tensor* beta,
                         float eps, Tensor* y, Tensor* mean, Tensor* rstd) const {
  const int64_t width = gamma.numel();
  cpu::NormForward(kind, x.data(), gamma.data(), beta != nullptr ? beta->data() : nullptr,
                   Rows(x, width), width, eps, y->data(), mean->data(), rstd->data());
}

void CpuOps::NormBackwardInput(NormKind kind, const Tensor& dy, const Tensor& x,
                               const Tensor& gamma, const Tensor& mean, const Tensor& rstd,
                               Tensor* dx) const {
  const int64_t width = gamma.numel();
  cpu::NormBackwardInput(kind, dy.data(), x.data(), gamma.data(), mean.data(), rstd.data(),
                         Rows(x, width), width, dx->data());
}

void CpuOps::NormBackwardWeight(const Tensor& dy, const Tensor& x, const Tensor& mean,
                                const Tensor& rstd, Tensor* dgamma, Tensor* dbeta) const {
  const int64_t width = dgamma->numel();
  cpu::NormBackwardWeight(dy.data(), x.data(), mean.data(), rstd.data(), Rows(x, width), width,
                          dgamma->data(), dbeta != nullptr ? dbeta->data() : nullptr);
}

void CpuOps::GeluForward(const Tensor& x, Tensor* y) const {
  ParallelFor(x.numel(), kElementGrain, [&](int64_t begin, int64_t end) {
    cpu::GeluForward(x.data() + begin, end - begin, y->data() + begin);
  });
}

void CpuOps::GeluBackward(const Tensor& x, const Tensor& dy, Tensor* dx) const {
  ParallelFor(dy.numel(), kElementGrain, [&](int64_t begin, int64_t end) {
    cpu::GeluBackward(x.data() + begin, dy.data() + begin, end - begin, dx->data() + begin);
  });
}

void CpuOps::SquaredReluForward(const Tensor& x, Tensor* y) const {
  cpu::SquaredReluForward(x.data(), x.numel(), y->data());
}

void CpuOps::SquaredReluBackward(const Tensor& x, const Tensor& dy, Tensor* dx) const {
  cpu::SquaredReluBackward(x.data(), dy.data(), dy.numel(), dx->data());
}

void CpuOps::SwigluForward(const Tensor& x, Tensor* y) const {
  const int64_t width = y->dim(y->rank() - 1);
  ParallelFor(Rows(*y, width), RowGrain(width), [&](int64_t begin, int64_t end) {
    cpu::SwigluForward(x.data() + begin * 2 * width, end - begin, width, y->data() + begin * width);
  });
}

void CpuOps::SwigluBackward(const Tensor& x, const Tensor& dy, Tensor* dx) const {
  const int64_t width = dy.dim(dy.rank() - 1);
  ParallelFor(Rows(dy, width), RowGrain(width), [&](int64_t begin, int64_t end) {
    cpu::SwigluBackward(x.data() + begin * 2 * width, dy.data() + begin * width, end - begin, width,
                        dx->data() + begin * 2 * width);
  });
}

// An element's mask depends on its index alone (first_index + i), so the split changes
// nothing.
void CpuOps::Dropout(const CounterRng& rng, float p, uint64_t first_index, const Tensor& in,
                     Tensor* out) const {
  ParallelFor(in.numel(), kElementGrain, [&](int64_t begin, int64_t end) {
    cpu::ApplyDropout(rng, p, first_index + static_cast<uint64_t>(begin), end - begin,
                      in.data() + begin, out->data() + begin);
  });
}

// The base class's composition (bias, dropout, residual add) in one threaded pass over the
// rows, each row's elements rounded as the composition rounds them.
void CpuOps::BiasDropoutAdd(const Tensor* bias, const CounterRng& rng, float p,
                            uint64_t first_index, const Tensor& residual, Tensor* y) const {
  const int64_t width = y->shape().back();
  ParallelFor(Rows(*y, width), RowGrain(width), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      cpu::BiasDropoutAddRow(bias != nullptr ? bias->data() : nullptr, rng, p,
                             first_index + static_cast<uint64_t>(r * width), width,
                             residual.data() + r * width, y->data() + r * width);
    }
  });
}

void CpuOps::CopyColumns(const Tensor& src, int64_t src_col, int64_t width, Tensor* dst,
                         int64_t dst_col) const {
  assert(src.dtype() == dst->dtype());
  const int64_t src_width = src.shape().back(), dst_width = dst->shape().back();
  const int64_t rows = Rows(src, src_width);
  assert(rows == Rows(*dst, dst_width) && src_col + width <= src_width &&
         dst_col + width <= dst_width);
  const size_t element = SizeOf(src.dtype());
  const char* from = static_cast<const char*>(src.raw()) + src_col * element;
  char* to = static_cast<char*>(dst->raw()) + dst_col * element;
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(to + r * dst_width * element, from + r * src_width * element, width * element);
  }
}

void CpuOps::RotateQueriesAndKeys(const RopeTable& table, const AttentionShape& shape,
                                  absl::Span<const int32_t> positions, bool inverse,
                                  Tensor* qkv) const {
  const int64_t width = shape.qkv_width();
  for (int64_t t = 0; t < Rows(*qkv, width); ++t) {
    for (int64_t g = 0; g < shape.groups; ++g) {
      // The group's query heads and its key head are adjacent: rotate them together.
      cpu::ApplyRope(table, positions[t], shape.heads_per_group + 1, shape.head_dim, inverse,
                     qkv->data() + t * width + g * shape.group_width());
    }
  }
}

void CpuOps::AttentionForward(const AttentionShape& shape, const Tensor& qkv, float scale,
                              const AttentionDropout& dropout, const AttentionMask& mask,
                              Tensor* saved, Tensor* ctx) const {
  *saved = NewFloatActivation({shape.batch, shape.heads(), shape.seq});
  cpu::AttentionForward(shape, mask, qkv.data(), scale, dropout, saved->data(), ctx->data());
}

void CpuOps::AttentionBackward(const AttentionShape& shape, const Tensor& qkv, const Tensor& saved,
                               const Tensor& ctx, const Tensor& dctx, float scale,
                               const AttentionDropout& dropout, const AttentionMask& mask,
                               Tensor* dqkv) const {
  cpu::AttentionBackward(shape, mask, qkv.data(), saved.data(), ctx.data(), dctx.data(), scale,
                         dropout, dqkv->data());
}

void CpuOps::PackKeysValues(const AttentionShape& shape, const Tensor& qkv, Tensor* kv) const {
  cpu::PackKeysValues(shape, qkv.data(), kv->data());
}

void CpuOps::AddKeyValueGrad(const AttentionShape& shape, const Tensor& dkv, Tensor* dqkv) const {
  cpu::AddKeyValueGrad(shape, dkv.data(), dqkv->data());
}

void CpuOps::AttentionBlockForward(const AttentionShape& shape, int64_t key_rows,
                                   const AttentionMask& mask, const Tensor& qkv, const Tensor& kv,
                                   float scale, const AttentionDropout& dropout, bool first,
                                   Tensor* ctx, Tensor* lse) const {
  cpu::AttentionBlockForward(shape, key_rows, mask, qkv.data(), kv.data(), scale, dropout, first,
                             ctx->data(), lse->data());
}

void CpuOps::AttentionBlockBackward(const AttentionShape& shape, int64_t key_rows,
                                    const AttentionMask& mask, const Tensor& qkv, const Tensor& kv,
                                    const Tensor& ctx, const Tensor& lse, const Tensor& dctx,
                                    float scale, const AttentionDropout& dropout, Tensor* dqkv,
                                    Tensor* dkv) const {
  cpu::AttentionBlockBackward(shape, key_rows, mask, qkv.data(), kv.data(), ctx.data(), lse.data(),
                              dctx.data(), scale, dropout, dqkv->data(), dkv->data());
}

void CpuOps::EmbeddingForward(const Tensor& table, int64_t vocab_start,
                              absl::Span<const int32_t> ids, Tensor* out) const {
  cpu::EmbeddingForward(table.data(), vocab_start, table.dim(0), ids.data(),
                        static_cast<int64_t>(ids.size()), table.dim(1), out->data());
}

void CpuOps::EmbeddingBackwardWeight(const Tensor& dout, int64_t vocab_start,
                                     absl::Span<const int32_t> ids, Tensor* dtable) const {
  cpu::EmbeddingBackwardWeight(dout.data(), vocab_start, dtable->dim(0), ids.data(),
                               static_cast<int64_t>(ids.size()), dtable->dim(1), dtable->data());
}

void CpuOps::RowMax(const Tensor& logits, absl::Span<double> row_max) const {
  cpu::RowMax(logits.data(), logits.dim(0), logits.dim(1), row_max.data());
}

void CpuOps::SumExpAndTarget(const Tensor& logits, absl::Span<const int32_t> labels,
                             int64_t vocab_start, absl::Span<const double> row_max,
                             absl::Span<double> sum_exp, absl::Span<double> target) const {
  cpu::SumExpAndTarget(logits.data(), labels.data(), logits.dim(0), logits.dim(1), vocab_start,
                       row_max.data(), sum_exp.data(), target.data());
}

void CpuOps::RowMaxSumExpAndTarget(const Tensor& logits, absl::Span<const int32_t> labels,
                                   int64_t vocab_start, absl::Span<double> row_max,
                                   absl::Span<double> sum_exp, absl::Span<double> target) const {
  cpu::RowMaxSumExpAndTarget(logits.data(), labels.data(), logits.dim(0), logits.dim(1),
                             vocab_start, row_max.data(), sum_exp.data(), target.data());
}

void CpuOps::CrossEntropyBackward(absl::Span<const int32_t> labels,
                                  absl::Span<const float> logsumexp, int64_t vocab_start,
                                  float scale, absl::Span<const float> loss_mask,
                                  Tensor* logits) const {
  cpu::CrossEntropyBackward(labels.data(), logsumexp.data(), logits->dim(0), logits->dim(1),
                            vocab_start, scale, loss_mask.empty() ? nullptr : loss_mask.data(),
                            logits->data());
}

void CpuOps::PermuteTokens(const Tensor& x, absl::Span<const int32_t> token_of_row,
                           absl::Span<const float> row_weight, Tensor* out) const {
  cpu::PermuteTokens(x.data(), x.dim(1), token_of_row.data(),
                     row_weight.empty() ? nullptr : row_weight.data(),
                     static_cast<int64_t>(token_of_row.size()), out->data());
}

void CpuOps::UnpermuteTokens(const Tensor& permuted, absl::Span<const int32_t> row_of_slot,
                             absl::Span<const float> slot_weight, Tensor* out) const {
  const int64_t tokens = out->dim(0);
  cpu::UnpermuteTokens(permuted.data(), out->dim(1), row_of_slot.data(),
                       slot_weight.empty() ? nullptr : slot_weight.data(), tokens,
                       static_cast<int64_t>(row_of_slot.size()) / tokens, out->data());
}

void CpuOps::SlotDots(const Tensor& dy, const Tensor& permuted,
                      absl::Span<const int32_t> row_of_slot, absl::Span<float> out) const {
  const int64_t tokens = dy.dim(0);
  cpu::SlotDots(dy.data(), permuted.data(), dy.dim(1), row_of_slot.data(), tokens,
                static_cast<int64_t>(row_of_slot.size()) / tokens, out.data());
}
}  // namespace conveyor
