#include "runtime/cpu/cpu_bf16_ops.h"

#include <algorithm>
#include <vector>

#include "absl/functional/function_ref.h"
#include "runtime/cpu/activation.h"
#include "runtime/cpu/bf16_gemm.h"
#include "runtime/cpu/cpu_ops.h"
#include "runtime/cpu/cross_entropy.h"
#include "runtime/cpu/thread_pool.h"

namespace conveyor {
namespace {

bool Bf16(const Tensor& t) { return t.dtype() == DType::kBFloat16; }
const BFloat16* Bits(const Tensor& t) { return static_cast<const BFloat16*>(t.raw()); }
BFloat16* Bits(Tensor* t) { return static_cast<BFloat16*>(t->raw()); }

// The fp32 sums of one GEMM before they are rounded to bf16: the calling thread's
// workspace, reused from call to call (as cuBLASLt's workspace is) rather than a new
// tensor, whose host pages would be faulted in and NaN-filled at every call.
float* Sums(int64_t count) {
  thread_local std::vector<float> sums;
  if (static_cast<int64_t>(sums.size()) < count) sums.resize(count);
  return sums.data();
}

// A worker's fp32 copy of one row.
float* RowBuffer(int64_t width) {
  thread_local std::vector<float> row;
  if (static_cast<int64_t>(row.size()) < width) row.resize(width);
  return row.data();
}

void Widen(const BFloat16* in, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = ToFloat(in[i]);
}
void Round(const float* in, int64_t n, BFloat16* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = ToBFloat16(in[i]);
}

// fn(r, row) for each of `rows` rows `width` wide of `sums`, on the CPU threads.
void ForEachRow(int64_t rows, int64_t width, float* sums,
                absl::FunctionRef<void(int64_t, float*)> fn) {
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 14) / width);
  cpu::ParallelFor(rows, grain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) fn(r, sums + r * width);
  });
}

// fn(begin, end, wide) over the rows of a bf16 [rows, width] tensor on the CPU threads,
// `wide` holding rows [begin, end) widened to fp32: a few rows at a time in a worker's
// cache-sized buffer, where the emulation widens the whole tensor into a new one (for
// the logits, a [tokens, vocab] fp32 copy faulted in and written at every call).
void ForWideRows(const Tensor& x, absl::FunctionRef<void(int64_t, int64_t, float*)> fn) {
  const int64_t width = x.shape().back(), rows = x.numel() / width;
  const int64_t chunk = std::max<int64_t>(1, (int64_t{1} << 15) / width);  // 128 KiB of fp32
  cpu::ParallelFor(rows, chunk, [&](int64_t begin, int64_t end) {
    float* wide = RowBuffer(chunk * width);
    for (int64_t b = begin; b < end; b += chunk) {
      const int64_t e = std::min(end, b + chunk);
      Widen(Bits(x) + b * width, (e - b) * width, wide);
      fn(b, e, wide);
    }
  });
}

}  // namespace

CpuBf16Ops::CpuBf16Ops() : Bf16EmulationOps(&CpuOps::Get()) {}

const CpuBf16Ops& CpuBf16Ops::Get() {
  static const CpuBf16Ops* ops = new CpuBf16Ops();
  return *ops;
}

void CpuBf16Ops::Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                      const Tensor& a, const Tensor& b, float beta, Tensor* c) const {
  if (!Bf16(a) || !Bf16(b)) {
    Bf16EmulationOps::Gemm(trans_a, trans_b, m, n, k, alpha, a, b, beta, c);
    return;
  }
  const int64_t lda = trans_a ? m : k, ldb = trans_b ? k : n;
  if (!Bf16(*c)) {
    cpu::Bf16Gemm(trans_a, trans_b, m, n, k, alpha, Bits(a), lda, Bits(b), ldb, beta, c->data(), n);
    return;
  }
  // A bf16 output: alpha * (the fp32 sum) + beta * c in fp32, then one rounding to bf16.
  float* sums = Sums(m * n);
  if (beta != 0.0f) {
    ForEachRow(m, n, sums, [&](int64_t r, float* row) { Widen(Bits(*c) + r * n, n, row); });
  }
  cpu::Bf16Gemm(trans_a, trans_b, m, n, k, alpha, Bits(a), lda, Bits(b), ldb, beta, sums, n);
  ForEachRow(m, n, sums, [&](int64_t r, float* row) { Round(row, n, Bits(c) + r * n); });
}

bool CpuBf16Ops::Fusable(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& out) {
  return Bf16(x) && Bf16(w) && Bf16(out) && (bias == nullptr || !Bf16(*bias));
}

// y = bf16(x w^T + bias): the bias is added to the fp32 sums, one rounding per element
// (the emulation rounds the product, then the sum).
void CpuBf16Ops::LinearForward(const Tensor& x, const Tensor& w, const Tensor* bias,
                               Tensor* y) const {
  if (!Fusable(x, w, bias, *y)) return Bf16EmulationOps::LinearForward(x, w, bias, y);
  const int64_t rows = x.dim(0), out = w.dim(0), in = w.dim(1);
  float* sums = Sums(rows * out);
  cpu::Bf16Gemm(false, true, rows, out, in, 1.0f, Bits(x), in, Bits(w), in, 0.0f, sums, out);
  ForEachRow(rows, out, sums, [&](int64_t r, float* row) {
    if (bias != nullptr) {
      for (int64_t j = 0; j < out; ++j) row[j] += bias->data()[j];
    }
    Round(row, out, Bits(y) + r * out);
  });
}

// pre = bf16(x w^T + bias), y = bf16(GELU(pre)): GELU reads pre as stored, the value
// its backward reads.
void CpuBf16Ops::LinearGeluForward(const Tensor& x, const Tensor& w, const Tensor* bias,
                                   Tensor* pre, Tensor* y) const {
  if (!Fusable(x, w, bias, *pre) || !Bf16(*y)) {
    return Bf16EmulationOps::LinearGeluForward(x, w, bias, pre, y);
  }
  const int64_t rows = x.dim(0), out = w.dim(0), in = w.dim(1);
  float* sums = Sums(rows * out);
  cpu::Bf16Gemm(false, true, rows, out, in, 1.0f, Bits(x), in, Bits(w), in, 0.0f, sums, out);
  ForEachRow(rows, out, sums, [&](int64_t r, float* row) {
    if (bias != nullptr) {
      for (int64_t j = 0; j < out; ++j) row[j] += bias->data()[j];
    }
    Round(row, out, Bits(pre) + r * out);
    Widen(Bits(*pre) + r * out, out, row);
    float* gelu = RowBuffer(out);
    cpu::GeluForward(row, out, gelu);
    Round(gelu, out, Bits(y) + r * out);
  });
}

// dx = bf16(GELU'(pre) * (dy w)), the derivative applied to the fp32 sums.
void CpuBf16Ops::LinearGeluBackwardInput(const Tensor& dy, const Tensor& w, const Tensor& pre,
                                         Tensor* dx) const {
  if (!Fusable(dy, w, nullptr, *dx) || !Bf16(pre)) {
    return Bf16EmulationOps::LinearGeluBackwardInput(dy, w, pre, dx);
  }
  const int64_t rows = dy.dim(0), out = w.dim(0), in = w.dim(1);
  float* sums = Sums(rows * in);
  cpu::Bf16Gemm(false, false, rows, in, out, 1.0f, Bits(dy), out, Bits(w), in, 0.0f, sums, in);
  ForEachRow(rows, in, sums, [&](int64_t r, float* row) {
    float* p = RowBuffer(in);
    Widen(Bits(pre) + r * in, in, p);
    cpu::GeluBackward(p, row, in, row);
    Round(row, in, Bits(dx) + r * in);
  });
}

// The cross-entropy on bf16 logits: the fp32 functions over a few widened rows at a time
// (each row's results depend on that row alone, so they equal the emulation's).
void CpuBf16Ops::RowMaxSumExpAndTarget(const Tensor& logits, absl::Span<const int32_t> labels,
                                       int64_t vocab_start, absl::Span<double> row_max,
                                       absl::Span<double> sum_exp,
                                       absl::Span<double> target) const {
  if (!Bf16(logits)) {
    return Bf16EmulationOps::RowMaxSumExpAndTarget(logits, labels, vocab_start, row_max, sum_exp,
                                                   target);
  }
  const int64_t vocab = logits.shape().back();
  ForWideRows(logits, [&](int64_t begin, int64_t end, float* wide) {
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
  ForWideRows(*logits, [&](int64_t begin, int64_t end, float* wide) {
    cpu::CrossEntropyBackward(labels.data() + begin, logsumexp.data() + begin, end - begin, vocab,
                              vocab_start, scale,
                              loss_mask.empty() ? nullptr : loss_mask.data() + begin, wide);
    Round(wide, (end - begin) * vocab, Bits(logits) + begin * vocab);
  });
}

// The residual stream's adds on bf16 values, in one pass each: every sum in fp32 and
// rounded once, as the emulation rounds it after each op (so the results are its own),
// without its widened copies of y, x and the residual.
void CpuBf16Ops::Add(const Tensor& x, Tensor* y) const {
  if (!Bf16(x) || !Bf16(*y)) return Bf16EmulationOps::Add(x, y);
  const BFloat16* in = Bits(x);
  BFloat16* out = Bits(y);
  cpu::ParallelFor(y->numel(), int64_t{1} << 14, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = ToBFloat16(ToFloat(out[i]) + ToFloat(in[i]));
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
  if (p != 0.0f || !Bf16(residual) || !Bf16(*y) || (bias != nullptr && Bf16(*bias))) {
    return Bf16EmulationOps::BiasDropoutAdd(bias, rng, p, first_index, residual, y);
  }
  AddBiasAndResidual(bias, &residual, y);
}

// y[r, j] = bf16(y[r, j] + bias[j]) (when bias), then bf16(that + residual[r, j]) (when
// residual), in one threaded pass over y's rows.
void CpuBf16Ops::AddBiasAndResidual(const Tensor* bias, const Tensor* residual, Tensor* y) {
  const int64_t width = y->shape().back();
  const float* b = bias != nullptr ? bias->data() : nullptr;
  const BFloat16* res = residual != nullptr ? Bits(*residual) : nullptr;
  BFloat16* out = Bits(y);
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 14) / width);
  cpu::ParallelFor(y->numel() / width, grain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      BFloat16* row = out + r * width;
      for (int64_t j = 0; b != nullptr && j < width; ++j) {
        row[j] = ToBFloat16(ToFloat(row[j]) + b[j]);
      }
      for (int64_t j = 0; res != nullptr && j < width; ++j) {
        row[j] = ToBFloat16(ToFloat(row[j]) + ToFloat(res[r * width + j]));
      }
    }
  });
}

}  // namespace conveyor
