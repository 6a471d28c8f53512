// The on-disk cache of GPT indices (--data-cache-path), laid out as
// Megatron's: for each dataset split, four files named by the MD5 of a
// description of everything that determines the indices,
//   <hash>-GPTDataset-<split>-description.txt
//   <hash>-GPTDataset-<split>-{document,sample,shuffle}_index.npy
// The first rank that needs them builds and writes them; ranks that find them
// load them instead of spending minutes rebuilding the same arrays (the trainer
// lets the ranks build in turns, trainer/training_data_turns.h, so that each
// view of the folder is built once). Every file is written under a temporary
// name and renamed into place, and the description goes last, so a rank that
// sees all four never reads a half-written one, and two ranks writing the same
// (identical) files at once leave them whole.
#ifndef CONVEYOR_DATA_GPT_INDEX_CACHE_H_
#define CONVEYOR_DATA_GPT_INDEX_CACHE_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "data/gpt_indices.h"

namespace conveyor {

struct GptIndexCacheOptions {
  // --data-cache-path; empty means build in memory on every rank.
  std::string path;
};

// What identifies one dataset split's indices, like Megatron's
// unique_identifiers. The dataset's sequence and token counts are included
// too, so that rewriting the files under the same prefix is a cache miss.
struct GptIndexKey {
  std::string dataset_path;
  std::string index_split;  // "train", "valid" or "test"
  std::string split;        // the --split text; empty for per-split paths
  std::optional<std::pair<double, double>> split_range;  // fractions used
  int64_t num_sequences = 0;
  int64_t num_tokens = 0;
  GptIndexConfig config;
};

// Megatron-style JSON description (indent 4) of `key`.
std::string GptIndexDescription(const GptIndexKey& key);

struct GptIndexCacheFiles {
  std::string description, document_index, sample_index, shuffle_index;
};
GptIndexCacheFiles CacheFilesFor(const std::string& cache_dir, const GptIndexKey& key);

// The indices of `documents`, from the cache when it has them; otherwise built
// and written there. Nothing here waits for another rank. A cached file that is
// malformed or does not fit the dataset is a DataLoss error naming it.
absl::StatusOr<GptIndices> BuildOrLoadGptIndices(absl::Span<const int32_t> sequence_lengths,
                                                 absl::Span<const int32_t> documents,
                                                 const GptIndexKey& key,
                                                 const GptIndexCacheOptions& options);

// Writes one file of the cache: base/atomic_file.h's WriteFileAtomically, durably, through
// <path>.tmp.<pid> (rank 0 alone writes a cache).
absl::Status WriteCacheFile(const std::string& path, const std::string& bytes);

}  // namespace conveyor

#endif  // CONVEYOR_DATA_GPT_INDEX_CACHE_H_
