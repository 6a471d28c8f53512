#include "runtime/cpu/dropout.h"

#include <cstring>

#include "runtime/cpu/vector_math.h"

namespace conveyor::cpu {
namespace {

// The dropped value of element i: v * scale when its draw keeps it, else 0.
[[gnu::always_inline]] inline float Dropped(const CounterRng& rng, float p, float scale,
                                            uint64_t index, float v) {
  return rng.Uniform(index) >= p ? v * scale : 0.0f;
}

// y[i] = residual[i] + (y[i] + bias[i]) with dropout 0: vectorised (vector_math.h).
CONVEYOR_VECTOR_CLONES
void BiasAddRow(const float* bias, int64_t n, const float* residual, float* y) {
  if (bias != nullptr) {
    MapLanes(n, y, [&](int64_t i) { return (y[i] + bias[i]) + residual[i]; });
  } else {
    MapLanes(n, y, [&](int64_t i) { return y[i] + residual[i]; });
  }
}

}  // namespace

void ApplyDropout(const CounterRng& rng, float p, uint64_t first_index, int64_t n, const float* in,
                  float* out) {
  if (p <= 0.0f) {
    if (out != in) std::memcpy(out, in, n * sizeof(float));
    return;
  }
  const float scale = 1.0f / (1.0f - p);
  for (int64_t i = 0; i < n; ++i) {
    out[i] = Dropped(rng, p, scale, first_index + static_cast<uint64_t>(i), in[i]);
  }
}

void BiasDropoutAddRow(const float* bias, const CounterRng& rng, float p, uint64_t first_index,
                       int64_t n, const float* residual, float* y) {
  if (p <= 0.0f) {
    BiasAddRow(bias, n, residual, y);
    return;
  }
  const float scale = 1.0f / (1.0f - p);
  for (int64_t i = 0; i < n; ++i) {
    const float v = bias != nullptr ? y[i] + bias[i] : y[i];
    y[i] = Dropped(rng, p, scale, first_index + static_cast<uint64_t>(i), v) + residual[i];
  }
}

}  // namespace conveyor::cpu
