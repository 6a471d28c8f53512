// The two arrays behind Megatron's BlendedDataset, built by its greedy rule
// (helpers.cpp build_blending_indices) so that a blend serves the same
// datasets' samples in the same order as Megatron:
//   dataset_index[i]:        which dataset serves blended sample i;
//   dataset_sample_index[i]: which sample of that dataset it is.
// Sample i goes to the dataset furthest behind its target share, i.e. with the
// largest weight * max(i, 1) - samples_taken_so_far (the first such on ties).
#ifndef CONVEYOR_DATA_BLENDING_INDICES_H_
#define CONVEYOR_DATA_BLENDING_INDICES_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace conveyor {

struct BlendingIndices {
  std::vector<int16_t> dataset_index;  // int16 as Megatron's (< 32767 datasets)
  std::vector<int64_t> dataset_sample_index;
};

// `weights` should be normalised (see NormalizeWeights); `size` is the number
// of blended samples.
BlendingIndices BuildBlendingIndices(absl::Span<const double> weights, int64_t size);

// Megatron over-builds each blended dataset's parts by this share
// (BlendedMegatronDatasetConfig.mid_level_dataset_surplus) so that the greedy
// rule, which can run slightly ahead of a weight, never runs out of samples.
inline constexpr double kMidLevelDatasetSurplus = 0.005;

// Samples requested from each dataset of a weighted blend for a split of
// `target_size` samples: ceil(ceil(target_size * w) * (1 + surplus)), as
// Megatron's _get_size_per_split_per_dataset. With surplus 0 these are the
// per-dataset targets, whose sum is the blended dataset's length.
std::vector<int64_t> SamplesPerDataset(absl::Span<const double> normalized_weights,
                                       int64_t target_size, double surplus);

}  // namespace conveyor

#endif  // CONVEYOR_DATA_BLENDING_INDICES_H_
