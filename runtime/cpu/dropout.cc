#include "runtime/cpu/dropout.h"

namespace conveyor::cpu {

void ApplyDropout(const CounterRng& rng, float p, uint64_t first_index, int64_t n, const float* in,
                  float* out) {
  if (p <= 0.0f) {
    if (out != in) {
      for (int64_t i = 0; i < n; ++i) out[i] = in[i];
    }
    return;
  }
  const float scale = 1.0f / (1.0f - p);
  for (int64_t i = 0; i < n; ++i) {
    out[i] = rng.Uniform(first_index + static_cast<uint64_t>(i)) >= p ? in[i] * scale : 0.0f;
  }
}

}  // namespace conveyor::cpu
