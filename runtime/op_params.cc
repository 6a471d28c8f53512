#include "runtime/op_params.h"

#include <cmath>

namespace conveyor {

RopeTable::RopeTable(int64_t seq, int64_t head_dim, float base, const RopeScaling& scaling)
    : half(head_dim / 2), cos(seq * (head_dim / 2)), sin(seq * (head_dim / 2)) {
  const std::vector<float> inv_freq = RopeFrequencies(head_dim, base, scaling);
  const float concentration = RopeConcentration(scaling);
  for (int64_t i = 0; i < half; ++i) {
    for (int64_t p = 0; p < seq; ++p) {
      const float angle = static_cast<float>(p) * inv_freq[i];
      cos[p * half + i] = std::cos(angle) * concentration;
      sin[p * half + i] = std::sin(angle) * concentration;
    }
  }
}

}  // namespace conveyor
