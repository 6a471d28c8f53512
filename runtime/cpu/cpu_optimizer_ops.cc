#include "runtime/cpu/cpu_optimizer_ops.h"

#include <algorithm>
#include <vector>

#include "runtime/cpu/adamw.h"
#include "runtime/cpu/thread_pool.h"
#include "runtime/cpu/vector_math.h"

namespace conveyor {
namespace {

using cpu::ParallelFor;

// Elements per pool task. Every update below is elementwise, so the split changes nothing.
constexpr int64_t kGrain = 1 << 14;

// The reductions' chunks: each array cut into pieces of kGrain elements (its last one
// shorter), numbered in order. A chunk's sum is computed whole by one thread, and the
// chunks' sums are added in their order, so a reduction's result depends on the arrays
// alone, never on the threads.
struct Chunk {
  FloatArray elements;
  size_t array;  // index of its array in the arrays reduced
};

std::vector<Chunk> Chunks(absl::Span<const FloatArray> arrays) {
  std::vector<Chunk> chunks;
  for (size_t a = 0; a < arrays.size(); ++a) {
    for (int64_t begin = 0; begin < arrays[a].n; begin += kGrain) {
      chunks.push_back({{arrays[a].data + begin, std::min(kGrain, arrays[a].n - begin)}, a});
    }
  }
  return chunks;
}

// reduce(chunk) of every chunk, on the pool's threads.
template <typename T, typename Reduce>
std::vector<T> ReduceChunks(const std::vector<Chunk>& chunks, Reduce reduce) {
  std::vector<T> results(chunks.size());
  // Four chunks (256 KB) a task at least: enough work to outweigh waking a thread.
  ParallelFor(static_cast<int64_t>(chunks.size()), 4, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) results[c] = reduce(chunks[c].elements);
  });
  return results;
}

// sum_i x[i]^2 in double lanes (vector_math.h).
CONVEYOR_VECTOR_CLONES
double SquaresOf(FloatArray x) {
  return cpu::SumInDouble(x.n, [&](int64_t i) {
    const double v = x.data[i];
    return v * v;
  });
}

int64_t ZerosOf(FloatArray x) {
  int64_t zeros = 0;
  for (int64_t i = 0; i < x.n; ++i) zeros += x.data[i] == 0.0f ? 1 : 0;
  return zeros;
}

}  // namespace

const CpuOptimizerOps& CpuOptimizerOps::Get() {
  static const CpuOptimizerOps* ops = new CpuOptimizerOps();
  return *ops;
}

// Each array's chunks in order, then the arrays in order (OptimizerOps' contract).
double CpuOptimizerOps::SumOfSquares(absl::Span<const FloatArray> arrays) const {
  const std::vector<Chunk> chunks = Chunks(arrays);
  const std::vector<double> squares = ReduceChunks<double>(chunks, SquaresOf);
  double total = 0.0, array_total = 0.0;
  for (size_t c = 0; c < chunks.size(); ++c) {
    array_total += squares[c];
    if (c + 1 == chunks.size() || chunks[c + 1].array != chunks[c].array) {
      total += array_total;
      array_total = 0.0;
    }
  }
  return total;
}

int64_t CpuOptimizerOps::CountZeros(absl::Span<const FloatArray> arrays) const {
  int64_t zeros = 0;
  for (const int64_t z : ReduceChunks<int64_t>(Chunks(arrays), ZerosOf)) zeros += z;
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
