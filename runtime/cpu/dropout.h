// Inverted dropout whose mask is drawn by global element index from a counter-based
// RNG: element i is kept when Uniform(first_index + i) >= p, and kept values are
// scaled by 1 / (1 - p). Since the mask is a pure function of the index, backward
// regenerates it instead of storing it, and every layout draws the same mask.
#ifndef CONVEYOR_RUNTIME_CPU_DROPOUT_H_
#define CONVEYOR_RUNTIME_CPU_DROPOUT_H_

#include <cstdint>

#include "runtime/philox.h"

namespace conveyor::cpu {

// out = in * mask / (1 - p). The same call maps dy to dx. In-place is allowed.
void ApplyDropout(const CounterRng& rng, float p, uint64_t first_index, int64_t n, const float* in,
                  float* out);

// Megatron's bias-dropout-add over n elements of one row: y[i] = residual[i] +
// Dropout(y[i] + bias[i]) (bias may be null), element i's mask drawn at first_index + i.
// Each element takes the roundings of AddBias, ApplyDropout and the residual add in
// turn, so the result is theirs bit for bit, in one pass instead of three.
void BiasDropoutAddRow(const float* bias, const CounterRng& rng, float p, uint64_t first_index,
                       int64_t n, const float* residual, float* y);

}  // namespace conveyor::cpu

#endif  // CONVEYOR_RUNTIME_CPU_DROPOUT_H_
