// GPT-2's byte-level BPE (Megatron's GPT2BPETokenizer), from the published
// vocab.json and merges.txt: pre-tokenize, map each byte to a printable
// stand-in character, then apply merges in rank order within each word.
#ifndef CONVEYOR_DATA_TOKENIZERS_GPT2_BPE_TOKENIZER_H_
#define CONVEYOR_DATA_TOKENIZERS_GPT2_BPE_TOKENIZER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "data/tokenizers/tokenizer.h"

namespace conveyor {

class Gpt2BpeTokenizer : public Tokenizer {
 public:
  // Errors name the file and the problem (missing, malformed, a merge whose
  // result is not in the vocabulary, no <|endoftext|>).
  static absl::StatusOr<std::unique_ptr<Gpt2BpeTokenizer>> Load(const std::string& vocab_file,
                                                                const std::string& merges_file);

  absl::StatusOr<std::vector<int32_t>> Tokenize(absl::string_view text) const override;
  absl::StatusOr<std::string> Detokenize(absl::Span<const int32_t> ids) const override;
  int64_t vocab_size() const override { return int64_t(decoder_.size()); }
  int32_t eod() const override { return eod_; }

 private:
  Gpt2BpeTokenizer() = default;
  // BPE of one pre-tokenized word, appending ids to `out`.
  void EncodeWord(absl::string_view word, std::vector<int32_t>* out) const;
  std::vector<int32_t> Bpe(absl::string_view word) const;

  absl::flat_hash_map<std::string, int32_t> encoder_;
  std::vector<std::string> decoder_;                   // id -> token (byte stand-ins, UTF-8)
  absl::flat_hash_map<std::string, int> merge_ranks_;  // "left right" -> rank
  int32_t eod_ = -1;

  // Words repeat heavily in real text; caching their BPE is the main speedup.
  mutable absl::Mutex cache_mu_;
  mutable absl::flat_hash_map<std::string, std::vector<int32_t>> cache_ ABSL_GUARDED_BY(cache_mu_);
};

}  // namespace conveyor

#endif  // CONVEYOR_DATA_TOKENIZERS_GPT2_BPE_TOKENIZER_H_
