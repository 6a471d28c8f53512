#include "runtime/cpu/cross_entropy.h"

#include <algorithm>
#include <cmath>

namespace conveyor::cpu {

void CrossEntropyForward(const float* logits, const int32_t* labels, int64_t rows,
                         int64_t vocab, float* losses, float* logsumexp) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* z = logits + r * vocab;
    const float max = *std::max_element(z, z + vocab);
    // fp32 exponentials (each in (0, 1] after the max shift) summed in double: the
    // sum over a large vocabulary is where fp32 would lose digits.
    double sum = 0.0;
    for (int64_t v = 0; v < vocab; ++v) sum += std::exp(z[v] - max);
    logsumexp[r] = max + static_cast<float>(std::log(sum));
    losses[r] = logsumexp[r] - z[labels[r]];
  }
}

void CrossEntropyBackward(const int32_t* labels, const float* logsumexp, int64_t rows,
                          int64_t vocab, float scale, float* logits) {
  for (int64_t r = 0; r < rows; ++r) {
    float* z = logits + r * vocab;
    for (int64_t v = 0; v < vocab; ++v) z[v] = scale * std::exp(z[v] - logsumexp[r]);
    z[labels[r]] -= scale;
  }
}

}  // namespace conveyor::cpu
