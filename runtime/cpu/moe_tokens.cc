#include "runtime/cpu/moe_tokens.h"

#include <algorithm>

namespace conveyor::cpu {

void PermuteTokens(const float* x, int64_t width, const int32_t* token_of_row,
                   const float* row_weight, int64_t rows, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    float* dst = out + r * width;
    if (token_of_row[r] < 0) {
      std::fill(dst, dst + width, 0.0f);
      continue;
    }
    const float* src = x + static_cast<int64_t>(token_of_row[r]) * width;
    const float w = row_weight != nullptr ? row_weight[r] : 1.0f;
    for (int64_t i = 0; i < width; ++i) dst[i] = w * src[i];
  }
}

void UnpermuteTokens(const float* permuted, int64_t width, const int32_t* row_of_slot,
                     const float* slot_weight, int64_t tokens, int64_t topk, float* out) {
  for (int64_t t = 0; t < tokens; ++t) {
    float* dst = out + t * width;
    std::fill(dst, dst + width, 0.0f);
    for (int64_t j = 0; j < topk; ++j) {
      const int32_t row = row_of_slot[t * topk + j];
      if (row < 0) continue;
      const float* src = permuted + static_cast<int64_t>(row) * width;
      const float w = slot_weight != nullptr ? slot_weight[t * topk + j] : 1.0f;
      for (int64_t i = 0; i < width; ++i) dst[i] += w * src[i];
    }
  }
}

void SlotDots(const float* dy, const float* permuted, int64_t width, const int32_t* row_of_slot,
              int64_t tokens, int64_t topk, float* out) {
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t j = 0; j < topk; ++j) {
      const int32_t row = row_of_slot[t * topk + j];
      double dot = 0.0;
      if (row >= 0) {
        const float* a = dy + t * width;
        const float* b = permuted + static_cast<int64_t>(row) * width;
        for (int64_t i = 0; i < width; ++i) dot += static_cast<double>(a[i]) * b[i];
      }
      out[t * topk + j] = static_cast<float>(dot);
    }
  }
}

}  // namespace conveyor::cpu
