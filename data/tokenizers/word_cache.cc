#include "data/tokenizers/word_cache.h"

#include "absl/hash/hash.h"

namespace conveyor {

WordCache::Shard& WordCache::ShardOf(absl::string_view word) {
  return shards_[absl::HashOf(word) % kShards];
}

bool WordCache::Lookup(absl::string_view word, std::vector<int32_t>* out) {
  if (word.size() > kMaxWordBytes) return false;
  Shard& shard = ShardOf(word);
  absl::MutexLock lock(&shard.mu);
  auto it = shard.map.find(word);
  if (it == shard.map.end()) return false;
  out->insert(out->end(), it->second.begin(), it->second.end());
  return true;
}

void WordCache::Insert(absl::string_view word, absl::Span<const int32_t> ids) {
  if (word.size() > kMaxWordBytes) return;
  Shard& shard = ShardOf(word);
  absl::MutexLock lock(&shard.mu);
  if (shard.map.size() >= kMaxEntriesPerShard) shard.map.clear();
  shard.map.emplace(std::string(word), std::vector<int32_t>(ids.begin(), ids.end()));
}

}  // namespace conveyor
