// CpuBf16Ops's ops other than the GEMMs (runtime/cpu/cpu_bf16_ops.h): each reads its bf16
// inputs a chunk of rows at a time, widened into a worker's cache-sized buffers
// (bf16_row_chunks.h), runs the fp32 function on the chunk and rounds the chunk's results
// once. Rows are independent in every one of them (and the sums over rows keep their
// order), so the results are the emulation's bit for bit, without its widened copies of
// whole tensors.
#include <algorithm>

#include "runtime/cpu/bf16_convert.h"
#include "runtime/cpu/bf16_row_chunks.h"
#include "runtime/cpu/cpu_bf16_ops.h"
#include "runtime/cpu/cross_entropy.h"
#include "runtime/cpu/dropout.h"
#include "runtime/cpu/norm.h"
#include "runtime/cpu/thread_pool.h"

namespace conveyor {
namespace {

bool Bf16(const Tensor& t) { return t.dtype() == DType::kBFloat16; }
bool Bf16(const Tensor* t) { return t != nullptr && Bf16(*t); }
const BFloat16* Bits(const Tensor& t) { return static_cast<const BFloat16*>(t.raw()); }
BFloat16* Bits(Tensor* t) { return static_cast<BFloat16*>(t->raw()); }

// Rows of width `width` in a tensor.
int64_t Rows(const Tensor& t, int64_t width) { return t.numel() / width; }

}  // namespace

void CpuBf16Ops::RowMaxSumExpAndTarget(const Tensor& logits, absl::Span<const int32_t> labels,
                                       int64_t vocab_start, absl::Span<double> row_max,
                                       absl::Span<double> sum_exp,
                                       absl::Span<double> target) const {
  if (!Bf16(logits)) {
    return Bf16EmulationOps::RowMaxSumExpAndTarget(logits, labels, vocab_start, row_max, sum_exp,
                                                   target);
  }
  const int64_t vocab = logits.shape().back();
  cpu::ForRowChunks(Rows(logits, vocab), vocab, true, [&](int64_t begin, int64_t end) {
    const float* wide = cpu::WideRows(Bits(logits), vocab, begin, end, 0);
    cpu::RowMaxSumExpAndTarget(wide, labels.data() + begin, end - begin, vocab, vocab_start,
                               row_max.data() + begin, sum_exp.data() + begin,
                               target.data() + begin);
  });
}

void CpuBf16Ops::CrossEntropyBackward(absl::Span<const int32_t> labels,
                                      absl::Span<const float> logsumexp, int64_t vocab_start,
                                      float scale, absl::Span<const float> loss_mask,
                                      Tensor* logits) const {
  if (!Bf16(*logits)) {
    return Bf16EmulationOps::CrossEntropyBackward(labels, logsumexp, vocab_start, scale, loss_mask,
                                                  logits);
  }
  const int64_t vocab = logits->shape().back();
  cpu::ForRowChunks(Rows(*logits, vocab), vocab, true, [&](int64_t begin, int64_t end) {
    float* wide = cpu::WideRows(Bits(logits), vocab, begin, end, 0);
    cpu::CrossEntropyBackward(labels.data() + begin, logsumexp.data() + begin, end - begin, vocab,
                              vocab_start, scale,
                              loss_mask.empty() ? nullptr : loss_mask.data() + begin, wide);
    cpu::RoundToBf16(wide, (end - begin) * vocab, Bits(logits) + begin * vocab);
  });
}

void CpuBf16Ops::Add(const Tensor& x, Tensor* y) const {
  if (!Bf16(x) || !Bf16(*y)) return Bf16EmulationOps::Add(x, y);
  cpu::ForRowChunks(y->numel(), 1, true, [&](int64_t begin, int64_t end) {
    float* sum = cpu::WideRows(Bits(y), 1, begin, end, 0);
    const float* in = cpu::WideRows(Bits(x), 1, begin, end, 1);
    for (int64_t i = 0; i < end - begin; ++i) sum[i] += in[i];
    cpu::RoundToBf16(sum, end - begin, Bits(y) + begin);
  });
}

void CpuBf16Ops::AddBias(const Tensor& bias, Tensor* y) const {
  if (Bf16(bias) || !Bf16(*y)) return Bf16EmulationOps::AddBias(bias, y);
  AddBiasAndResidual(&bias, nullptr, y);
}

// With p = 0 the dropout keeps every value unscaled: y = bf16(bf16(y + bias) + residual),
// the composition's two roundings. Other p run the composition.
void CpuBf16Ops::BiasDropoutAdd(const Tensor* bias, const CounterRng& rng, float p,
                                uint64_t first_index, const Tensor& residual, Tensor* y) const {
  if (p != 0.0f || !Bf16(residual) || !Bf16(*y) || Bf16(bias)) {
    return Bf16EmulationOps::BiasDropoutAdd(bias, rng, p, first_index, residual, y);
  }
  AddBiasAndResidual(bias, &residual, y);
}

// y[r, j] = bf16(y[r, j] + bias[j]) (when bias), then bf16(that + residual[r, j]) (when
// residual): the emulation rounds after each op.
void CpuBf16Ops::AddBiasAndResidual(const Tensor* bias, const Tensor* residual, Tensor* y) {
  const int64_t width = y->shape().back();
  cpu::ForRowChunks(Rows(*y, width), width, true, [&](int64_t begin, int64_t end) {
    const int64_t n = (end - begin) * width;
    BFloat16* out = Bits(y) + begin * width;
    float* sum = cpu::WideRows(Bits(y), width, begin, end, 0);
    if (bias != nullptr) {
      for (int64_t i = 0; i < n; ++i) sum[i] += bias->data()[i % width];
    }
    if (residual != nullptr) {
      if (bias != nullptr) {  // the rounding after the bias
        cpu::RoundToBf16(sum, n, out);
        cpu::WidenBf16(out, n, sum);
      }
      const float* res = cpu::WideRows(Bits(*residual), width, begin, end, 1);
      for (int64_t i = 0; i < n; ++i) sum[i] += res[i];
    }
    cpu::RoundToBf16(sum, n, out);
  });
}

// dbias += the sums of dy's rows, each column's rows added in order as the fp32 op adds
// them, split by columns over the threads.
void CpuBf16Ops::AccumulateBiasGrad(const Tensor& dy, Tensor* dbias) const {
  if (!Bf16(dy) || Bf16(*dbias)) return Bf16EmulationOps::AccumulateBiasGrad(dy, dbias);
  const int64_t width = dbias->numel(), rows = Rows(dy, width);
  float* db = dbias->data();
  cpu::ParallelFor(width, 16, [&](int64_t begin, int64_t end) {
    float* row = cpu::ChunkBuffer(0, end - begin);
    for (int64_t r = 0; r < rows; ++r) {
      cpu::WidenBf16(Bits(dy) + r * width + begin, end - begin, row);
      for (int64_t j = begin; j < end; ++j) db[j] += row[j - begin];
    }
  });
}

// Element i's mask depends on first_index + i alone, so each chunk runs the fp32
// dropout from its own first index.
void CpuBf16Ops::Dropout(const CounterRng& rng, float p, uint64_t first_index, const Tensor& in,
                         Tensor* out) const {
  if (!Bf16(in) || !Bf16(*out)) return Bf16EmulationOps::Dropout(rng, p, first_index, in, out);
  if (p <= 0.0f) {  // every value kept unscaled, as the fp32 dropout keeps it
    if (out->raw() != in.raw()) out->CopyFrom(in);
    return;
  }
  cpu::ForRowChunks(in.numel(), 1, true, [&](int64_t begin, int64_t end) {
    float* wide = cpu::WideRows(Bits(in), 1, begin, end, 0);
    cpu::ApplyDropout(rng, p, first_index + static_cast<uint64_t>(begin), end - begin, wide, wide);
    cpu::RoundToBf16(wide, end - begin, Bits(out) + begin);
  });
}

// The norms over chunks of rows: forward and the input gradient on the pool's threads
// (rows are independent), the weight gradient in row order on the calling thread, as the
// fp32 op sums it. gamma and beta stay fp32 (they are not read in the compute type).
void CpuBf16Ops::NormForward(NormKind kind, const Tensor& x, const Tensor& gamma,
                             const Tensor* beta, float eps, Tensor* y, Tensor* mean,
                             Tensor* rstd) const {
  if (!Bf16(x) || !Bf16(*y) || Bf16(gamma) || Bf16(beta)) {
    return Bf16EmulationOps::NormForward(kind, x, gamma, beta, eps, y, mean, rstd);
  }
  const int64_t width = gamma.numel();
  cpu::ForRowChunks(Rows(x, width), width, true, [&](int64_t begin, int64_t end) {
    const float* wide = cpu::WideRows(Bits(x), width, begin, end, 0);
    float* normed = cpu::ChunkBuffer(1, (end - begin) * width);
    cpu::NormForward(kind, wide, gamma.data(), beta != nullptr ? beta->data() : nullptr,
                     end - begin, width, eps, normed, mean->data() + begin, rstd->data() + begin);
    cpu::RoundToBf16(normed, (end - begin) * width, Bits(y) + begin * width);
  });
}

void CpuBf16Ops::NormBackwardInput(NormKind kind, const Tensor& dy, const Tensor& x,
                                   const Tensor& gamma, const Tensor& mean, const Tensor& rstd,
                                   Tensor* dx) const {
  if (!Bf16(dy) || !Bf16(x) || !Bf16(*dx) || Bf16(gamma)) {
    return Bf16EmulationOps::NormBackwardInput(kind, dy, x, gamma, mean, rstd, dx);
  }
  const int64_t width = gamma.numel();
  cpu::ForRowChunks(Rows(x, width), width, true, [&](int64_t begin, int64_t end) {
    const float* wide_dy = cpu::WideRows(Bits(dy), width, begin, end, 0);
    const float* wide_x = cpu::WideRows(Bits(x), width, begin, end, 1);
    float* grad = cpu::ChunkBuffer(2, (end - begin) * width);
    cpu::NormBackwardInput(kind, wide_dy, wide_x, gamma.data(), mean.data() + begin,
                           rstd.data() + begin, end - begin, width, grad);
    cpu::RoundToBf16(grad, (end - begin) * width, Bits(dx) + begin * width);
  });
}

void CpuBf16Ops::NormBackwardWeight(const Tensor& dy, const Tensor& x, const Tensor& mean,
                                    const Tensor& rstd, Tensor* dgamma, Tensor* dbeta) const {
  if (!Bf16(dy) || !Bf16(x)) {
    return Bf16EmulationOps::NormBackwardWeight(dy, x, mean, rstd, dgamma, dbeta);
  }
  const int64_t width = dgamma->numel();
  cpu::ForRowChunks(Rows(x, width), width, false, [&](int64_t begin, int64_t end) {
    const float* wide_dy = cpu::WideRows(Bits(dy), width, begin, end, 0);
    const float* wide_x = cpu::WideRows(Bits(x), width, begin, end, 1);
    cpu::NormBackwardWeight(wide_dy, wide_x, mean.data() + begin, rstd.data() + begin,
                            end - begin, width, dgamma->data(),
                            dbeta != nullptr ? dbeta->data() : nullptr);
  });
}

// fp32 <-> bf16 (the weight copies each step) with the AVX-512 conversions, on the
// pool's threads.
void CpuBf16Ops::Cast(const Tensor& in, Tensor* out) const {
  const bool rounds = in.dtype() == DType::kFloat32 && Bf16(*out);
  const bool widens = Bf16(in) && out->dtype() == DType::kFloat32;
  if (!rounds && !widens) return Bf16EmulationOps::Cast(in, out);
  cpu::ParallelFor(in.numel(), cpu::kChunkValues / 2, [&](int64_t begin, int64_t end) {
    if (rounds) {
      cpu::RoundToBf16(in.data() + begin, end - begin, Bits(out) + begin);
    } else {
      cpu::WidenBf16(Bits(in) + begin, end - begin, out->data() + begin);
    }
  });
}

// A lookup moves values: the bf16 rows of the table as they are (the emulation widens
// the whole table, copies fp32 rows and rounds them back to the same bits), zero rows
// for ids outside this rank's vocabulary rows.
void CpuBf16Ops::EmbeddingForward(const Tensor& table, int64_t vocab_start,
                                  absl::Span<const int32_t> ids, Tensor* out) const {
  if (!Bf16(table) || !Bf16(*out)) {
    return Bf16EmulationOps::EmbeddingForward(table, vocab_start, ids, out);
  }
  const int64_t rows = table.dim(0), width = table.dim(1);
  cpu::ParallelFor(static_cast<int64_t>(ids.size()), 64, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t row = ids[t] - vocab_start;
      BFloat16* o = Bits(out) + t * width;
      if (row < 0 || row >= rows) {
        std::fill(o, o + width, BFloat16{0});
      } else {
        std::copy(Bits(table) + row * width, Bits(table) + (row + 1) * width, o);
      }
    }
  });
}

}  // namespace conveyor
