#include "data/blending_indices.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace conveyor {

BlendingIndices BuildBlendingIndices(absl::Span<const double> weights, int64_t size) {
  BlendingIndices out;
  out.dataset_index.resize(size);
  out.dataset_sample_index.resize(size);
  std::vector<int64_t> taken(weights.size(), 0);
  for (int64_t i = 0; i < size; ++i) {
    // max(i, 1): at i = 0 every error would be 0 - 0; scaling by 1 instead
    // makes the first sample go to the heaviest dataset.
    const double scale = std::max(double(i), 1.0);
    size_t best = 0;
    double best_error = weights[0] * scale - double(taken[0]);
    for (size_t d = 1; d < weights.size(); ++d) {
      const double error = weights[d] * scale - double(taken[d]);
      if (error > best_error) {  // strict: ties keep the lower dataset id
        best_error = error;
        best = d;
      }
    }
    out.dataset_index[i] = int16_t(best);
    out.dataset_sample_index[i] = taken[best]++;
  }
  return out;
}

std::vector<int64_t> SamplesPerDataset(absl::Span<const double> normalized_weights,
                                       int64_t target_size, double surplus) {
  std::vector<int64_t> out;
  out.reserve(normalized_weights.size());
  for (double w : normalized_weights) {
    // Two roundings, in this order, as Megatron: the target share first, then
    // the surplus on top of it.
    const double target = std::ceil(double(target_size) * w);
    // Saturating: an absurd request must reach the memory check, not wrap.
    const double with_surplus = std::ceil(target * (1.0 + surplus));
    out.push_back(with_surplus >= double(std::numeric_limits<int64_t>::max())
                      ? std::numeric_limits<int64_t>::max()
                      : int64_t(with_surplus));
  }
  return out;
}

}  // namespace conveyor
