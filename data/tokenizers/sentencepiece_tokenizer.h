// Megatron's SentencePiece tokenizers over a tokenizer.model, through
// Debian's libsentencepiece (the library Python's `sentencepiece` wraps):
//
//   SentencePieceTokenizer     the model's pieces, then <CLS> <SEP> <EOD> <MASK>,
//                              the pad/bos/eos pieces and --vocab-extra-ids
//                              <extra_id_i> added where missing; these strings
//                              are matched in text first; eod is <EOD>.
//   GPTSentencePieceTokenizer  the model alone; eod is its eos.
//   Llama2Tokenizer            the model with its bos before each text; eod is eos.
//
// Models that allow it are encoded word by word through a cache of each
// word's ids (encodes_by_words()), with exactly the ids of whole-text encoding.
#ifndef CONVEYOR_DATA_TOKENIZERS_SENTENCEPIECE_TOKENIZER_H_
#define CONVEYOR_DATA_TOKENIZERS_SENTENCEPIECE_TOKENIZER_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "data/tokenizers/sentencepiece_model.h"
#include "data/tokenizers/tokenizer.h"
#include "data/tokenizers/word_cache.h"

namespace conveyor {

class SentencePieceTokenizer : public Tokenizer {
 public:
  enum class Flavor { kMegatron, kGpt, kLlama2 };

  // Errors name `model_file` and the problem.
  static absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>> Load(const std::string& model_file,
                                                                      Flavor flavor,
                                                                      int vocab_extra_ids);

  // Text that is not valid UTF-8 is an error naming the byte offset.
  absl::StatusOr<std::vector<int32_t>> Tokenize(absl::string_view text) const override;
  // As Megatron's detokenize: SentencePiece's decode, with each added special
  // token written as " <TOKEN> " (kMegatron).
  absl::StatusOr<std::string> Detokenize(absl::Span<const int32_t> ids) const override;
  int64_t vocab_size() const override { return vocab_size_; }
  int32_t eod() const override { return eod_; }
  // Whether the model lets text be encoded word by word, each word's ids
  // cached (identity normalisation without whitespace removal, as Llama 2
  // and Mistral models; see EncodesByWords in the .cc).
  bool encodes_by_words() const { return by_words_; }

 private:
  SentencePieceTokenizer() = default;
  // Adds Megatron's special token `token` (a new id when the model lacks it).
  void AddSpecial(const std::string& token);
  absl::Status EncodePlain(absl::string_view text, std::vector<int32_t>* ids) const;
  // The ids of one word (see EncodePlain), through the cache.
  absl::Status EncodeWord(absl::string_view word, bool first, std::vector<int32_t>* ids) const;

  std::string path_;
  Flavor flavor_ = Flavor::kGpt;
  std::unique_ptr<SentencePieceModel> model_;
  // kMegatron's special tokens in the order they were added (which breaks
  // ties between matches at the same position), and those past the model.
  std::vector<std::pair<std::string, int32_t>> specials_;
  absl::flat_hash_map<int32_t, std::string> special_text_;
  std::vector<std::string> added_pieces_;  // ids from model_->size() on
  int64_t vocab_size_ = 0;
  int32_t eod_ = -1;
  // The model allows encoding word by word (sentencepiece_tokenizer.cc).
  bool by_words_ = false;
  mutable WordCache cache_;
};

}  // namespace conveyor

#endif  // CONVEYOR_DATA_TOKENIZERS_SENTENCEPIECE_TOKENIZER_H_
