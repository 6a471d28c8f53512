#include "runtime/op_params.h"

#include <cmath>

namespace conveyor {

RopeTable::RopeTable(int64_t seq, int64_t head_dim, float base)
    : half(head_dim / 2), cos(seq * (head_dim / 2)), sin(seq * (head_dim / 2)) {
  for (int64_t i = 0; i < half; ++i) {
    const float inv_freq =
        1.0f / std::pow(base, static_cast<float>(2 * i) / static_cast<float>(head_dim));
    for (int64_t p = 0; p < seq; ++p) {
      const float angle = static_cast<float>(p) * inv_freq;
      cos[p * half + i] = std::cos(angle);
      sin[p * half + i] = std::sin(angle);
    }
  }
}

}  // namespace conveyor
