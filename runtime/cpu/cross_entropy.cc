#include "runtime/cpu/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "runtime/cpu/thread_pool.h"
#include "runtime/cpu/vector_math.h"

namespace conveyor::cpu {
namespace {

// Rows per pool task: a row is a vocabulary of fp32 logits, tens of kilobytes.
constexpr int64_t kRowGrain = 4;
// The online pass's block: read once from memory, then again from L1 (8 KB).
constexpr int64_t kBlock = 2048;
// Exponentials summed in fp32 lanes over this many logits (16 per lane), then added into
// double lanes: the sum over a large vocabulary is where fp32 would lose digits.
constexpr int64_t kSumSpan = 16 * kLanes;

CONVEYOR_VECTOR_CLONES
float MaxOf(const float* z, int64_t n) {
  float lane[kLanes];
  std::fill(lane, lane + kLanes, -std::numeric_limits<float>::infinity());
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) lane[j] = z[i + j] > lane[j] ? z[i + j] : lane[j];
  }
  float max = *std::max_element(lane, lane + kLanes);
  for (; i < n; ++i) max = std::max(max, z[i]);
  return max;
}

// sum_v exp(z[v] - max) over n logits. The double lanes fold once at the end, in
// ReduceLanes' order, rather than the fp32 lanes into one double after every span (a
// chain of 16 dependent adds per 256 exponentials).
CONVEYOR_VECTOR_CLONES
double SumExp(const float* z, int64_t n, float max) {
  double wide[kLanes] = {};
  int64_t i = 0;
  for (; i + kSumSpan <= n; i += kSumSpan) {
    float lane[kLanes] = {};
    for (int64_t b = i; b < i + kSumSpan; b += kLanes) {
      for (int j = 0; j < kLanes; ++j) lane[j] += Exp(z[b + j] - max);
    }
    for (int j = 0; j < kLanes; ++j) wide[j] += lane[j];
  }
  double total = SumInDouble(kLanes, [&](int64_t j) { return wide[j]; });
  for (; i < n; ++i) total += Exp(z[i] - max);
  return total;
}

// z[v] = scale * exp(z[v] - lse).
CONVEYOR_VECTOR_CLONES
void ScaledExpInPlace(float* z, int64_t n, float lse, float scale) {
  MapLanes(n, z, [&](int64_t v) { return scale * Exp(z[v] - lse); });
}

double TargetLogit(const float* z, int32_t label, int64_t vocab, int64_t vocab_start) {
  const int64_t local = label - vocab_start;
  return (local >= 0 && local < vocab) ? z[local] : 0.0;
}

}  // namespace

void RowMax(const float* logits, int64_t rows, int64_t vocab, double* row_max) {
  ParallelFor(rows, kRowGrain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) row_max[r] = MaxOf(logits + r * vocab, vocab);
  });
}

void SumExpAndTarget(const float* logits, const int32_t* labels, int64_t rows, int64_t vocab,
                     int64_t vocab_start, const double* row_max, double* sum_exp, double* target) {
  ParallelFor(rows, kRowGrain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* z = logits + r * vocab;
      sum_exp[r] = SumExp(z, vocab, static_cast<float>(row_max[r]));
      target[r] = TargetLogit(z, labels[r], vocab, vocab_start);
    }
  });
}

void RowMaxSumExpAndTarget(const float* logits, const int32_t* labels, int64_t rows, int64_t vocab,
                           int64_t vocab_start, double* row_max, double* sum_exp, double* target) {
  ParallelFor(rows, kRowGrain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* z = logits + r * vocab;
      // Online softmax statistics (Milakov & Gimelshein, 2018): a block that raises the
      // running max m rescales the sum so far by exp(m_old - m_new).
      float max = -std::numeric_limits<float>::infinity();
      double sum = 0.0;
      for (int64_t b = 0; b < vocab; b += kBlock) {
        const int64_t n = std::min(kBlock, vocab - b);
        const float block_max = MaxOf(z + b, n);
        if (block_max > max) {
          if (sum > 0.0) sum *= std::exp(static_cast<double>(max) - block_max);
          max = block_max;
        }
        sum += SumExp(z + b, n, max);
      }
      row_max[r] = max;
      sum_exp[r] = sum;
      target[r] = TargetLogit(z, labels[r], vocab, vocab_start);
    }
  });
}

void CrossEntropyBackward(const int32_t* labels, const float* logsumexp, int64_t rows,
                          int64_t vocab, int64_t vocab_start, float scale, const float* loss_mask,
                          float* logits) {
  ParallelFor(rows, kRowGrain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      float* z = logits + r * vocab;
      const float row_scale = loss_mask != nullptr ? scale * loss_mask[r] : scale;
      ScaledExpInPlace(z, vocab, logsumexp[r], row_scale);
      const int64_t local = labels[r] - vocab_start;
      if (local >= 0 && local < vocab) z[local] -= row_scale;
    }
  });
}

}  // namespace conveyor::cpu
