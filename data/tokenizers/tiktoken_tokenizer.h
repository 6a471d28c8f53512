// Megatron's TikTokenizer (CustomTikTokenizer): byte-level BPE from a rank
// file, as the `tiktoken` library encodes (encode_ordinary): split the text
// with the --tiktoken-pattern regex, then merge each piece's bytes by rank.
// Ids: Megatron's special tokens first (<unk> <s> </s>, then <SPECIAL_i> up
// to --tiktoken-num-special-tokens), the ranks after them, cut so that the
// vocabulary is --vocab-size; eod is </s>.
//
// Rank files: Megatron's JSON list of {"rank", "token_bytes", "token_str"},
// Mistral's Tekken JSON (the same list under "vocab"), or tiktoken's text
// format ("<base64 token> <rank>" lines).
#ifndef CONVEYOR_DATA_TOKENIZERS_TIKTOKEN_TOKENIZER_H_
#define CONVEYOR_DATA_TOKENIZERS_TIKTOKEN_TOKENIZER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "data/tokenizers/bpe_merges.h"
#include "data/tokenizers/pcre2_regex.h"
#include "data/tokenizers/tokenizer.h"
#include "data/tokenizers/word_cache.h"

namespace conveyor {

struct TikTokenSpec {
  std::string rank_file;
  std::string pattern = "v2";  // Megatron's --tiktoken-pattern: v1 or v2
  int num_special_tokens = 1000;
  int64_t vocab_size = 131072;  // Megatron's default when --vocab-size is unset
};

class TikTokenizer : public Tokenizer {
 public:
  // Errors name the file or flag and the problem.
  static absl::StatusOr<std::unique_ptr<TikTokenizer>> Load(const TikTokenSpec& spec);

  absl::StatusOr<std::vector<int32_t>> Tokenize(absl::string_view text) const override;
  // The tokens' bytes, ill-formed UTF-8 replaced as Python's errors="replace".
  absl::StatusOr<std::string> Detokenize(absl::Span<const int32_t> ids) const override;
  int64_t vocab_size() const override { return vocab_size_; }
  int32_t eod() const override { return eod_; }

 private:
  TikTokenizer() = default;
  void EncodePiece(absl::string_view piece, std::vector<int32_t>* ids) const;

  std::string path_;
  std::unique_ptr<Pcre2Regex> pattern_;
  int32_t num_special_ = 0;
  std::vector<std::string> id_to_bytes_;               // specials' text, then each rank's bytes
  absl::flat_hash_map<std::string, int32_t> encoder_;  // bytes -> id
  BpeMerges merges_;
  int64_t vocab_size_ = 0;
  int32_t eod_ = -1;
  mutable WordCache cache_;
};

}  // namespace conveyor

#endif  // CONVEYOR_DATA_TOKENIZERS_TIKTOKEN_TOKENIZER_H_
