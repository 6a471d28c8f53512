// A bounded, thread-safe map from a pre-tokenized word to its token ids.
// Words repeat heavily in real text, so caching their BPE is the main
// speed-up; the map is split into shards, each with its own lock, so that
// preprocessing workers rarely wait on each other.
#ifndef CONVEYOR_DATA_TOKENIZERS_WORD_CACHE_H_
#define CONVEYOR_DATA_TOKENIZERS_WORD_CACHE_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"

namespace conveyor {

class WordCache {
 public:
  // Appends the ids of `word` to `out` and returns true when cached.
  bool Lookup(absl::string_view word, std::vector<int32_t>* out);
  void Insert(absl::string_view word, absl::Span<const int32_t> ids);

 private:
  static constexpr int kShards = 64;
  // A shard that fills up is emptied: simple, and the hot words come back at once.
  static constexpr size_t kMaxEntriesPerShard = 1 << 14;
  // Words longer than this are rare enough not to be worth keeping.
  static constexpr size_t kMaxWordBytes = 64;

  struct Shard {
    absl::Mutex mu;
    absl::flat_hash_map<std::string, std::vector<int32_t>> map ABSL_GUARDED_BY(mu);
  };
  Shard& ShardOf(absl::string_view word);

  std::array<Shard, kShards> shards_;
};

}  // namespace conveyor

#endif  // CONVEYOR_DATA_TOKENIZERS_WORD_CACHE_H_
