// Megatron's HuggingFaceTokenizer, without Python: reads a Hugging Face
// tokenizer.json (the file, or a folder holding it) and encodes as the
// `tokenizers` library does for a single text with special tokens added:
//
//   added tokens (leftmost-longest, on the raw text)
//   -> normalizer -> pre-tokenizer -> BPE model, on each stretch between them
//   -> post-processor (the template's BOS/EOS around the ids)
//
// Supported: BPE models, byte-level (GPT-2, GPT-NeoX, Llama 3, Qwen2) and
// SentencePiece-style with byte fallback (Llama 2, Mistral); the components
// in hf_normalizers.h, hf_pre_tokenizers.h and hf_decoders.h. Anything else a
// file declares is refused by name.
#ifndef CONVEYOR_DATA_TOKENIZERS_HF_TOKENIZER_H_
#define CONVEYOR_DATA_TOKENIZERS_HF_TOKENIZER_H_

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "data/tokenizers/bpe_merges.h"
#include "data/tokenizers/hf_decoders.h"
#include "data/tokenizers/hf_normalizers.h"
#include "data/tokenizers/hf_pre_tokenizers.h"
#include "data/tokenizers/tokenizer.h"
#include "data/tokenizers/word_cache.h"
#include "nlohmann/json_fwd.hpp"

namespace conveyor {

class HfTokenizer : public Tokenizer {
 public:
  // `path`: tokenizer.json, or a folder holding it. The eod is the folder's
  // tokenizer_config.json "eos_token" when there is one, else the first of
  // <|endoftext|>, <|end_of_text|>, </s>, <eos> in the vocabulary. Errors
  // name the file and the problem.
  static absl::StatusOr<std::unique_ptr<HfTokenizer>> Load(const std::string& path);

  // Text that is not valid UTF-8 is an error naming the byte offset.
  absl::StatusOr<std::vector<int32_t>> Tokenize(absl::string_view text) const override;
  // As the library's decode(ids, skip_special_tokens=False).
  absl::StatusOr<std::string> Detokenize(absl::Span<const int32_t> ids) const override;
  int64_t vocab_size() const override { return vocab_size_; }
  int32_t eod() const override { return eod_; }

 private:
  struct AddedToken {
    std::string content;
    int32_t id;
    bool lstrip, rstrip;
  };
  HfTokenizer() = default;
  absl::Status ParseModel(const nlohmann::json& model);
  absl::Status ParseAddedTokens(const nlohmann::json& added);
  absl::Status ParsePostProcessor(const nlohmann::json& spec);
  absl::Status ResolveEod(const std::string& folder);
  // The ids of one stretch of text between added tokens.
  absl::Status EncodeStretch(absl::string_view text, bool at_start,
                             std::vector<int32_t>* ids) const;
  // BPE of one pre-tokenized piece.
  void EncodeWord(absl::string_view word, std::vector<int32_t>* ids) const;

  std::string path_;  // for messages
  std::unique_ptr<HfNormalizer> normalizer_;
  std::unique_ptr<HfPreTokenizer> pre_tokenizer_;
  std::unique_ptr<HfDecoder> decoder_;

  // The BPE model.
  absl::flat_hash_map<std::string, int32_t> vocab_;
  BpeMerges merges_;
  bool ignore_merges_ = false;
  bool byte_fallback_ = false;
  bool fuse_unk_ = false;
  int32_t unk_id_ = -1;
  std::array<int32_t, 256> byte_ids_{};  // <0xXX> tokens, for byte fallback

  std::vector<AddedToken> added_;
  // Added tokens by first byte, longest first: leftmost-longest matching
  // tries only the few that can start at a position.
  std::array<std::vector<int>, 256> added_by_first_byte_;

  std::vector<std::string> id_to_token_;          // model vocabulary and added tokens
  std::vector<int32_t> prefix_ids_, suffix_ids_;  // the post-processor's template
  int64_t vocab_size_ = 0;
  int32_t eod_ = -1;
  mutable WordCache cache_;
};

}  // namespace conveyor

#endif  // CONVEYOR_DATA_TOKENIZERS_HF_TOKENIZER_H_
