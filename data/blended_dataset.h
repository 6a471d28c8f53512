// Megatron's BlendedDataset: several sample sources served in one sequence,
// each in proportion to its weight (see blending_indices.h for the order).
#ifndef CONVEYOR_DATA_BLENDED_DATASET_H_
#define CONVEYOR_DATA_BLENDED_DATASET_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "data/blending_indices.h"
#include "data/sample_source.h"

namespace conveyor {

class BlendedDataset : public SampleSource {
 public:
  // `weights` need not be normalised: they are, here, as Megatron normalises
  // them again inside BlendedDataset (twice in all for user weights, which
  // can matter in the last bit). Fails when a source has fewer samples than
  // the blend takes from it, rather than silently wrapping around it, and
  // (ResourceExhausted, naming the sizes) when the blending indices of `size`
  // samples would not fit in the memory this process may use.
  static absl::StatusOr<std::unique_ptr<BlendedDataset>> Create(
      std::vector<std::unique_ptr<SampleSource>> datasets, const std::vector<double>& weights,
      int64_t size);

  int64_t size() const override { return int64_t(indices_.dataset_index.size()); }
  // Sample `index` (modulo size()) of the blend.
  absl::StatusOr<std::vector<int32_t>> Sample(int64_t index) const override;

  const BlendingIndices& indices() const { return indices_; }
  const std::vector<double>& weights() const { return weights_; }
  const SampleSource& dataset(int i) const { return *datasets_[i]; }
  int num_datasets() const { return int(datasets_.size()); }

 private:
  BlendedDataset() = default;
  std::vector<std::unique_ptr<SampleSource>> datasets_;
  std::vector<double> weights_;
  BlendingIndices indices_;
};

}  // namespace conveyor

#endif  // CONVEYOR_DATA_BLENDED_DATASET_H_
