#include "runtime/cpu/rope.h"

#include <cmath>

namespace conveyor::cpu {

RopeTable::RopeTable(int64_t seq, int64_t head_dim, float base)
    : half(head_dim / 2), cos(seq * (head_dim / 2)), sin(seq * (head_dim / 2)) {
  for (int64_t i = 0; i < half; ++i) {
    // fp32 like Megatron's inv_freq = 1 / base^(arange(0, d, 2) / d).
    const float inv_freq =
        1.0f / std::pow(base, static_cast<float>(2 * i) / static_cast<float>(head_dim));
    for (int64_t p = 0; p < seq; ++p) {
      const float angle = static_cast<float>(p) * inv_freq;
      cos[p * half + i] = std::cos(angle);
      sin[p * half + i] = std::sin(angle);
    }
  }
}

void ApplyRope(const RopeTable& table, int64_t pos, int64_t count, int64_t stride, bool inverse,
               float* heads) {
  const float* c = table.cos.data() + pos * table.half;
  const float* s = table.sin.data() + pos * table.half;
  const float sign = inverse ? -1.0f : 1.0f;
  for (int64_t h = 0; h < count; ++h) {
    float* x1 = heads + h * stride;
    float* x2 = x1 + table.half;
    for (int64_t i = 0; i < table.half; ++i) {
      const float a = x1[i], b = x2[i];
      x1[i] = a * c[i] - sign * b * s[i];
      x2[i] = b * c[i] + sign * a * s[i];
    }
  }
}

}  // namespace conveyor::cpu
