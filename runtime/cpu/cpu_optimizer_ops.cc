#include "runtime/cpu/cpu_optimizer_ops.h"

#include "runtime/cpu/adamw.h"
#include "runtime/cpu/thread_pool.h"

namespace conveyor {
namespace {

using cpu::ParallelFor;

// Elements per pool task. Every update below is elementwise, so the split changes nothing.
constexpr int64_t kGrain = 1 << 14;

}  // namespace

const CpuOptimizerOps& CpuOptimizerOps::Get() {
  static const CpuOptimizerOps* ops = new CpuOptimizerOps();
  return *ops;
}

double CpuOptimizerOps::SumOfSquares(absl::Span<const FloatArray> arrays) const {
  double total = 0.0;
  for (const FloatArray& a : arrays) {
    double squares = 0.0;
    for (int64_t i = 0; i < a.n; ++i) squares += static_cast<double>(a.data[i]) * a.data[i];
    total += squares;
  }
  return total;
}

int64_t CpuOptimizerOps::CountZeros(absl::Span<const FloatArray> arrays) const {
  int64_t zeros = 0;
  for (const FloatArray& a : arrays) {
    for (int64_t i = 0; i < a.n; ++i) zeros += a.data[i] == 0.0f ? 1 : 0;
  }
  return zeros;
}

void CpuOptimizerOps::Scale(double factor, float* x, int64_t n) const {
  ParallelFor(n, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) x[i] = static_cast<float>(x[i] * factor);
  });
}

void CpuOptimizerOps::Add(const float* x, float* y, int64_t n) const {
  ParallelFor(n, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) y[i] += x[i];
  });
}

void CpuOptimizerOps::RoundToBFloat16(const float* in, BFloat16* out, int64_t n) const {
  ParallelFor(n, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = ToBFloat16(in[i]);
  });
}

void CpuOptimizerOps::WidenFromBFloat16(const BFloat16* in, float* out, int64_t n) const {
  ParallelFor(n, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = ToFloat(in[i]);
  });
}

void CpuOptimizerOps::AdamW(const AdamWHyperParams& hp,
                            absl::Span<const AdamWTensor> tensors) const {
  for (const AdamWTensor& t : tensors) {
    AdamWHyperParams own = hp;
    own.weight_decay = t.weight_decay;
    ParallelFor(t.n, kGrain, [&](int64_t begin, int64_t end) {
      AdamWStep(own, t.grad + begin, t.param + begin, t.exp_avg + begin, t.exp_avg_sq + begin,
                end - begin);
    });
  }
}

void CpuOptimizerOps::Sgd(const SgdHyperParams& hp, const float* grad, float* param,
                          float* momentum_buf, int64_t n) const {
  ParallelFor(n, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t j = begin; j < end; ++j) {
      const float d = grad[j] + hp.weight_decay * param[j];
      momentum_buf[j] = hp.first_step ? d : hp.momentum * momentum_buf[j] + d;
      param[j] -= hp.lr * momentum_buf[j];
    }
  });
}

}  // namespace conveyor
