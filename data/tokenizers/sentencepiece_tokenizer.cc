#include "data/tokenizers/sentencepiece_tokenizer.h"

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "data/mapped_file.h"
#include "data/tokenizers/sentencepiece_model_fields.pb.h"
#include "data/tokenizers/utf8_text.h"

namespace conveyor {
namespace {

constexpr char kMeta[] = "\xE2\x96\x81";  // U+2581, SentencePiece's escaped space

// Whether encoding `text` equals encoding its words one by one, a word being
// a run of spaces and what follows up to the next space after a non-space.
// SentencePiece encodes the normalized text, here "▁" + the text with spaces
// as "▁" (identity rules, a dummy prefix, no whitespace removal); if no piece
// holds "▁" after another character, no piece crosses the start of such a
// word, and BPE merges and unigram segmentation, being local, give each word
// the ids it gets alone. Encoding word " w" alone as "w" gives "▁w" through
// the dummy prefix, which is its normalized form.
bool EncodesByWords(const std::string& model_file) {
  absl::StatusOr<std::unique_ptr<MappedFile>> file = MappedFile::Open(model_file);
  spm::ModelFields model;
  if (!file.ok() || (*file)->data() == nullptr ||
      !model.ParseFromArray((*file)->data(), int((*file)->size()))) {
    return false;
  }
  const spm::ModelNormalizerSpec& n = model.normalizer_spec();
  if (!n.precompiled_charsmap().empty() || !n.normalization_rule_tsv().empty() ||
      !n.add_dummy_prefix() || n.remove_extra_whitespaces() || !n.escape_whitespaces() ||
      model.trainer_spec().treat_whitespace_as_suffix()) {
    return false;
  }
  for (const spm::ModelPiece& p : model.pieces()) {
    // User-defined pieces are matched whole before the model, across spaces.
    if (p.type() == spm::ModelPiece::USER_DEFINED) return false;
    const size_t meta = p.piece().find(kMeta, 1);
    for (size_t at = meta; at != std::string::npos; at = p.piece().find(kMeta, at + 3)) {
      if (at < 3 || p.piece().compare(at - 3, 3, kMeta) != 0) return false;
    }
  }
  return true;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>> SentencePieceTokenizer::Load(
    const std::string& model_file, Flavor flavor, int vocab_extra_ids) {
  auto tok = std::unique_ptr<SentencePieceTokenizer>(new SentencePieceTokenizer());
  tok->path_ = model_file;
  tok->flavor_ = flavor;
  ASSIGN_OR_RETURN(tok->model_, SentencePieceModel::Load(model_file));
  const SentencePieceModel& model = *tok->model_;
  tok->vocab_size_ = model.size();
  tok->by_words_ = EncodesByWords(model_file);
  if (flavor != Flavor::kMegatron) {
    if (vocab_extra_ids != 0) {
      return absl::InvalidArgumentError(
          "--vocab-extra-ids is for --tokenizer-type SentencePieceTokenizer only");
    }
    if (model.eos_id() < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(model_file, ": the model has no eos piece, which is the eod"));
    }
    tok->eod_ = model.eos_id();
    return tok;
  }
  // Megatron's _SentencePieceTokenizer._initalize; a pad/bos/eos id the model
  // does not define falls back to a new <PAD>/<BOS>/<EOS>.
  for (const char* t : {"<CLS>", "<SEP>", "<EOD>", "<MASK>"}) tok->AddSpecial(t);
  const std::pair<int, const char*> defined[] = {
      {model.pad_id(), "<PAD>"}, {model.bos_id(), "<BOS>"}, {model.eos_id(), "<EOS>"}};
  for (const auto& [id, fallback] : defined) {
    tok->AddSpecial(id >= 0 && id < model.size() ? model.Piece(id) : std::string(fallback));
  }
  for (int i = 0; i < vocab_extra_ids; ++i) tok->AddSpecial(absl::StrCat("<extra_id_", i, ">"));
  for (const auto& [text, id] : tok->specials_) {
    if (text == "<EOD>") tok->eod_ = id;
  }
  return tok;
}

void SentencePieceTokenizer::AddSpecial(const std::string& token) {
  for (const auto& s : specials_) {
    if (s.first == token) return;
  }
  int32_t id = model_->IdOf(token);
  if (id < 0) {
    for (size_t i = 0; i < added_pieces_.size(); ++i) {
      if (added_pieces_[i] == token) id = int32_t(model_->size() + i);
    }
  }
  if (id < 0) {
    id = int32_t(vocab_size_++);
    added_pieces_.push_back(token);
  }
  specials_.emplace_back(token, id);
  special_text_[id] = token;
}

absl::Status SentencePieceTokenizer::EncodePlain(absl::string_view text,
                                                 std::vector<int32_t>* ids) const {
  if (!by_words_) return EncodeWord(text, /*first=*/true, ids);
  // Words start at a space that follows neither a space nor "▁" and is not
  // the last character (a word " " alone could not be encoded as "▁").
  size_t start = 0;
  for (size_t i = 1; i + 1 < text.size(); ++i) {
    if (text[i] != ' ' || text[i - 1] == ' ' || absl::EndsWith(text.substr(0, i), kMeta)) {
      continue;
    }
    RETURN_IF_ERROR(EncodeWord(text.substr(start, i - start), start == 0, ids));
    start = i;
  }
  return EncodeWord(text.substr(start), start == 0, ids);
}

absl::Status SentencePieceTokenizer::EncodeWord(absl::string_view word, bool first,
                                                std::vector<int32_t>* ids) const {
  // A later word " w" is encoded as "w" (its space becomes the dummy prefix).
  // Cache keys of later words start with a space; the first word is cached
  // only when it does not, so that the two never share a key.
  const bool cached = by_words_ && !(first && absl::StartsWith(word, " "));
  if (cached && cache_.Lookup(word, ids)) return absl::OkStatus();
  ASSIGN_OR_RETURN(std::vector<int> piece_ids, model_->Encode(first ? word : word.substr(1)));
  if (cached) cache_.Insert(word, std::vector<int32_t>(piece_ids.begin(), piece_ids.end()));
  ids->insert(ids->end(), piece_ids.begin(), piece_ids.end());
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int32_t>> SentencePieceTokenizer::Tokenize(
    absl::string_view text) const {
  RETURN_IF_ERROR(CheckUtf8(text)) << path_;
  std::vector<int32_t> ids;
  if (flavor_ == Flavor::kLlama2) ids.push_back(model_->bos_id());
  if (flavor_ != Flavor::kMegatron) {
    RETURN_IF_ERROR(EncodePlain(text, &ids));
    return ids;
  }
  // The earliest special token in the rest of the text (the first added on
  // a tie), the text before it through the model, then its id.
  size_t pos = 0;
  while (true) {
    size_t best = absl::string_view::npos;
    const std::pair<std::string, int32_t>* found = nullptr;
    for (const auto& special : specials_) {
      const size_t at = text.find(special.first, pos);
      if (at < best) {
        best = at;
        found = &special;
      }
    }
    if (found == nullptr) break;
    RETURN_IF_ERROR(EncodePlain(text.substr(pos, best - pos), &ids));
    ids.push_back(found->second);
    pos = best + found->first.size();
  }
  RETURN_IF_ERROR(EncodePlain(text.substr(pos), &ids));
  return ids;
}

absl::StatusOr<std::string> SentencePieceTokenizer::Detokenize(
    absl::Span<const int32_t> ids) const {
  std::string text;
  std::vector<int> run;
  auto flush = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(std::string piece_text, model_->Decode(run));
    text += piece_text;
    run.clear();
    return absl::OkStatus();
  };
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab_size_) {
      return absl::InvalidArgumentError(
          absl::StrCat(path_, ": id ", id, " is outside the vocabulary of ", vocab_size_));
    }
    auto special = flavor_ == Flavor::kMegatron ? special_text_.find(id) : special_text_.end();
    if (special == special_text_.end()) {
      run.push_back(id);
      continue;
    }
    RETURN_IF_ERROR(flush());
    absl::StrAppend(&text, " ", special->second, " ");
  }
  RETURN_IF_ERROR(flush());
  return text;
}

}  // namespace conveyor
