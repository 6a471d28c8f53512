#include "runtime/cpu/rope.h"

namespace conveyor::cpu {

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
