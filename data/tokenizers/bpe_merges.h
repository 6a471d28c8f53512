// The merge step shared by the BPE tokenizers (tokenizer.json's BPE model and
// tiktoken): a word, as a list of symbol ids, repeatedly has its adjacent
// pair of lowest rank merged (the leftmost on ties), until no adjacent pair
// is a known merge. Hugging Face ranks merges by their line in the file;
// tiktoken by the rank of the merged token.
#ifndef CONVEYOR_DATA_TOKENIZERS_BPE_MERGES_H_
#define CONVEYOR_DATA_TOKENIZERS_BPE_MERGES_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace conveyor {

class BpeMerges {
 public:
  // Symbols `left` then `right` merge into `result` with priority `rank`
  // (lower merges first). A pair given twice keeps the later merge, as the
  // Hugging Face library's map of merges does.
  void Add(int32_t left, int32_t right, int32_t rank, int32_t result);
  size_t size() const { return table_.size(); }

  // Merges `symbols` in place.
  void Apply(std::vector<int32_t>* symbols) const;

 private:
  struct Merge {
    int32_t rank;
    int32_t result;
  };
  static uint64_t Key(int32_t left, int32_t right) {
    return (uint64_t(uint32_t(left)) << 32) | uint32_t(right);
  }
  const Merge* Find(int32_t left, int32_t right) const;

  absl::flat_hash_map<uint64_t, Merge> table_;
};

}  // namespace conveyor

#endif  // CONVEYOR_DATA_TOKENIZERS_BPE_MERGES_H_
