#include "data/tokenizers/tiktoken_tokenizer.h"

#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "data/mapped_file.h"
#include "data/tokenizers/json_file.h"
#include "data/tokenizers/utf8_text.h"

namespace conveyor {
namespace {

// Megatron's patterns (megatron/training/tokenizer/tokenizer.py).
constexpr char kPatternV1[] =
    R"([^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)";
constexpr char kPatternV2[] =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|)"
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|)"
    R"(\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// The tokens of a rank file, in rank order; entry i must have rank i.
absl::StatusOr<std::vector<std::string>> ReadRanks(const std::string& path) {
  std::vector<std::string> tokens;
  auto add = [&](absl::string_view b64, int64_t rank) -> absl::Status {
    std::string bytes;
    if (!absl::Base64Unescape(b64, &bytes) || bytes.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": token of rank ", rank, " is not non-empty base64"));
    }
    if (rank != int64_t(tokens.size())) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": entry ", tokens.size(), " has rank ",
                                                     rank, "; ranks must count up from 0"));
    }
    tokens.push_back(std::move(bytes));
    return absl::OkStatus();
  };
  ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file, MappedFile::Open(path));
  const absl::string_view text(file->data() == nullptr ? "" : file->data(), file->size());
  const absl::string_view head = absl::StripLeadingAsciiWhitespace(text);
  if (!head.empty() && (head[0] == '[' || head[0] == '{')) {
    ASSIGN_OR_RETURN(nlohmann::json json, ReadJsonFile(path));
    const nlohmann::json* list = &json;
    if (json.is_object() && json.contains("vocab")) list = &json["vocab"];  // Tekken
    if (!list->is_array()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path,
                       ": not a rank file (a JSON list of {\"rank\", \"token_bytes\"}, or Tekken's "
                       "object with a \"vocab\" list)"));
    }
    for (const nlohmann::json& entry : *list) {
      if (!entry.is_object() || !entry.contains("rank") || !entry["rank"].is_number_integer() ||
          !entry.contains("token_bytes") || !entry["token_bytes"].is_string()) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": entry ", tokens.size(),
                         " lacks an integer \"rank\" or a \"token_bytes\" string"));
      }
      RETURN_IF_ERROR(add(entry["token_bytes"].get<std::string>(), entry["rank"].get<int64_t>()));
    }
    return tokens;
  }
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    ++line_number;
    std::vector<absl::string_view> parts = absl::StrSplit(absl::StripAsciiWhitespace(line), ' ');
    int64_t rank;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[1], &rank)) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", line_number, ": expected '<base64 token> <rank>'"));
    }
    RETURN_IF_ERROR(add(parts[0], rank));
  }
  return tokens;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TikTokenizer>> TikTokenizer::Load(const TikTokenSpec& spec) {
  auto tok = std::unique_ptr<TikTokenizer>(new TikTokenizer());
  tok->path_ = spec.rank_file;
  if (spec.pattern != "v1" && spec.pattern != "v2") {
    return absl::InvalidArgumentError(
        absl::StrCat("--tiktoken-pattern '", spec.pattern, "' is not v1 or v2 (Megatron's)"));
  }
  ASSIGN_OR_RETURN(tok->pattern_,
                   Pcre2Regex::Compile(spec.pattern == "v1" ? kPatternV1 : kPatternV2));
  // Megatron's special tokens: <unk> <s> </s>, then fillers.
  std::vector<std::string> specials = {"<unk>", "<s>", "</s>"};
  if (spec.num_special_tokens < int(specials.size()) ||
      spec.num_special_tokens >= spec.vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tiktoken-num-special-tokens ", spec.num_special_tokens, " must be at least ",
        specials.size(), " (<unk> <s> </s>) and below --vocab-size ", spec.vocab_size));
  }
  for (int i = int(specials.size()); i < spec.num_special_tokens; ++i) {
    specials.push_back(absl::StrCat("<SPECIAL_", i, ">"));
  }
  tok->num_special_ = spec.num_special_tokens;
  tok->eod_ = 2;  // </s>
  tok->vocab_size_ = spec.vocab_size;
  tok->id_to_bytes_ = specials;

  ASSIGN_OR_RETURN(std::vector<std::string> ranks, ReadRanks(spec.rank_file));
  const int64_t inner = spec.vocab_size - spec.num_special_tokens;
  if (int64_t(ranks.size()) < inner) {
    return absl::InvalidArgumentError(absl::StrCat(
        spec.rank_file, " holds ", ranks.size(), " tokens, fewer than --vocab-size ",
        spec.vocab_size, " minus --tiktoken-num-special-tokens ", spec.num_special_tokens, " (",
        inner, "); lower --vocab-size to at most ", ranks.size() + spec.num_special_tokens));
  }
  ranks.resize(inner);
  for (int b = 0; b < 256 && b < inner; ++b) {
    if (ranks[b] != std::string(1, char(b))) {
      return absl::InvalidArgumentError(absl::StrCat(spec.rank_file, ": rank ", b,
                                                     " must be the single byte ", b,
                                                     " (ranks 0-255 are the bytes)"));
    }
  }
  for (int32_t r = 0; r < int32_t(ranks.size()); ++r) {
    const int32_t id = r + tok->num_special_;
    if (!tok->encoder_.emplace(ranks[r], id).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(spec.rank_file, ": the token of rank ", r, " appears twice"));
    }
    tok->id_to_bytes_.push_back(ranks[r]);
  }
  // tiktoken merges any adjacent pair whose concatenation is a token, lowest
  // rank first: every split of a token into two tokens is such a merge.
  for (const auto& [bytes, id] : tok->encoder_) {
    for (size_t k = 1; k < bytes.size(); ++k) {
      auto left = tok->encoder_.find(absl::string_view(bytes).substr(0, k));
      auto right = tok->encoder_.find(absl::string_view(bytes).substr(k));
      if (left != tok->encoder_.end() && right != tok->encoder_.end()) {
        tok->merges_.Add(left->second, right->second, id, id);
      }
    }
  }
  return tok;
}

void TikTokenizer::EncodePiece(absl::string_view piece, std::vector<int32_t>* ids) const {
  auto whole = encoder_.find(piece);
  if (whole != encoder_.end()) {
    ids->push_back(whole->second);
    return;
  }
  if (cache_.Lookup(piece, ids)) return;
  std::vector<int32_t> symbols;
  symbols.reserve(piece.size());
  for (char c : piece) symbols.push_back(int32_t(static_cast<unsigned char>(c)) + num_special_);
  merges_.Apply(&symbols);
  cache_.Insert(piece, symbols);
  ids->insert(ids->end(), symbols.begin(), symbols.end());
}

absl::StatusOr<std::vector<int32_t>> TikTokenizer::Tokenize(absl::string_view text) const {
  RETURN_IF_ERROR(CheckUtf8(text)) << path_;
  ASSIGN_OR_RETURN(auto matches, pattern_->FindAll(text));
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 1);
  for (const auto& [start, end] : matches) EncodePiece(text.substr(start, end - start), &ids);
  return ids;
}

absl::StatusOr<std::string> TikTokenizer::Detokenize(absl::Span<const int32_t> ids) const {
  std::string bytes;
  for (int32_t id : ids) {
    if (id < 0 || size_t(id) >= id_to_bytes_.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path_, ": id ", id, " is outside the vocabulary of ", vocab_size_));
    }
    bytes += id_to_bytes_[id];
  }
  return Utf8Lossy(bytes);
}

}  // namespace conveyor
