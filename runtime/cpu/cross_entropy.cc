#include "runtime/cpu/cross_entropy.h"

#include <algorithm>
#include <cmath>

namespace conveyor::cpu {

void RowMax(const float* logits, int64_t rows, int64_t vocab, double* row_max) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* z = logits + r * vocab;
    row_max[r] = *std::max_element(z, z + vocab);
  }
}

void SumExpAndTarget(const float* logits, const int32_t* labels, int64_t rows, int64_t vocab,
                     int64_t vocab_start, const double* row_max, double* sum_exp, double* target) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* z = logits + r * vocab;
    const float max = static_cast<float>(row_max[r]);
    // fp32 exponentials (each in (0, 1] after the max shift) summed in double: the
    // sum over a large vocabulary is where fp32 would lose digits.
    double sum = 0.0;
    for (int64_t v = 0; v < vocab; ++v) sum += std::exp(z[v] - max);
    sum_exp[r] = sum;
    const int64_t local = labels[r] - vocab_start;
    target[r] = (local >= 0 && local < vocab) ? z[local] : 0.0;
  }
}

void CrossEntropyBackward(const int32_t* labels, const float* logsumexp, int64_t rows,
                          int64_t vocab, int64_t vocab_start, float scale,
                          const float* loss_mask, float* logits) {
  for (int64_t r = 0; r < rows; ++r) {
    float* z = logits + r * vocab;
    const float row_scale = loss_mask != nullptr ? scale * loss_mask[r] : scale;
    for (int64_t v = 0; v < vocab; ++v) z[v] = row_scale * std::exp(z[v] - logsumexp[r]);
    const int64_t local = labels[r] - vocab_start;
    if (local >= 0 && local < vocab) z[local] -= row_scale;
  }
}

}  // namespace conveyor::cpu
