// Megatron's BlendedMegatronDatasetBuilder for GPT data: from --data-path and
// --split, or from --train/valid/test-data-path, the train, validation and
// test sample sources, each a GptDataset or a BlendedDataset of several.
//
// With --data-path every dataset is divided by --split into sequence ranges
// (see split.h) and split k of the blend draws only on split k of each
// dataset. With the per-split paths each dataset serves its split whole.
// Weighted blends over-build each part by kMidLevelDatasetSurplus; unweighted
// blends of several prefixes use one epoch of each, weighted by its size.
#ifndef CONVEYOR_DATA_DATASET_BUILDER_H_
#define CONVEYOR_DATA_DATASET_BUILDER_H_

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "data/blend.h"
#include "data/gpt_index_cache.h"
#include "data/sample_source.h"
#include "data/token_id_limit.h"

namespace conveyor {

inline constexpr std::array<const char*, 3> kSplitNames = {"train", "valid", "test"};

// What sets each split's sample count (train, valid, test), named by the error
// for indices too large for memory.
using SampleCountFlags = std::array<std::string, 3>;
// The trainer's, as Megatron's get_train_valid_test_num_samples.
SampleCountFlags TrainerSampleCountFlags();

struct DatasetBuildConfig {
  int64_t sequence_length = 0;
  uint32_t random_seed = 0;
  // Either `blend` (--data-path) divided by `split` ...
  std::optional<Blend> blend;
  std::string split = "969,30,1";
  // ... or one blend per split (--train/valid/test-data-path); a split
  // without one is not built.
  std::array<std::optional<Blend>, 3> blend_per_split;
  // Where the GPT indices are cached, and who builds them (see
  // gpt_index_cache.h). An empty cache folder builds them in memory.
  GptIndexCacheOptions cache;
  // Every sample's token ids are checked against it as the sample is read
  // (see token_id_limit.h); the default checks nothing.
  TokenIdLimit token_ids;
  SampleCountFlags sample_count_flags = TrainerSampleCountFlags();
};

using SplitSources = std::array<std::unique_ptr<SampleSource>, 3>;

// `sizes`: the samples each split (train, valid, test) must provide; a split
// asked for 0 samples is not built (nullptr). Errors name the flag and the
// file: a prefix that does not open or names a .bin/.idx file, a dataset with
// no sequences or tokens, a split range with no sequences, both or neither of
// the two ways of naming data; ResourceExhausted, naming the sizes, the flags
// in config.sample_count_flags and the fix, for indices too large for memory.
absl::StatusOr<SplitSources> BuildSplitDatasets(const DatasetBuildConfig& config,
                                                const std::array<int64_t, 3>& sizes);

}  // namespace conveyor

#endif  // CONVEYOR_DATA_DATASET_BUILDER_H_
