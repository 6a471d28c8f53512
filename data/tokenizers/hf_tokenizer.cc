#include "data/tokenizers/hf_tokenizer.h"

#include <sys/stat.h>

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "data/tokenizers/json_file.h"
#include "data/tokenizers/utf8_text.h"
#include "nlohmann/json.hpp"

namespace conveyor {
namespace {

bool IsFolder(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Ids index a table, so they must be about as dense as a vocabulary is: a
// stray huge id would otherwise allocate gigabytes.
int64_t IdLimit(size_t entries) { return 2 * int64_t(entries) + 4096; }

// lstrip/rstrip of added tokens strip ASCII whitespace here; the library
// strips any Unicode whitespace, which next to special tokens such as <mask>
// is in practice ASCII.
bool IsAsciiSpace(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

// The eos string a folder's tokenizer_config.json names ("eos_token": "..."
// or {"content": "..."}), or "" when there is none.
absl::StatusOr<std::string> ConfigEosToken(const std::string& folder) {
  const std::string path = folder + "/tokenizer_config.json";
  struct stat st;
  if (folder.empty() || ::stat(path.c_str(), &st) != 0) return std::string();
  ASSIGN_OR_RETURN(nlohmann::json config, ReadJsonFile(path));
  if (!config.is_object() || !config.contains("eos_token")) return std::string();
  const nlohmann::json& eos = config["eos_token"];
  if (eos.is_string()) return eos.get<std::string>();
  if (eos.is_object() && eos.contains("content") && eos["content"].is_string()) {
    return eos["content"].get<std::string>();
  }
  return std::string();
}

}  // namespace

absl::StatusOr<std::unique_ptr<HfTokenizer>> HfTokenizer::Load(const std::string& path) {
  const bool folder = IsFolder(path);
  const std::string file = folder ? path + "/tokenizer.json" : path;
  auto tok = std::unique_ptr<HfTokenizer>(new HfTokenizer());
  tok->path_ = file;
  ASSIGN_OR_RETURN(nlohmann::json spec, ReadJsonFile(file));
  // Wrong types and missing keys surface as nlohmann exceptions while the
  // components are read; they become one error naming the file.
  absl::Status status = [&]() -> absl::Status {
    try {
      if (!spec.is_object() || !spec.contains("model")) {
        return absl::InvalidArgumentError(
            "not a Hugging Face tokenizer.json (a JSON object with a \"model\" key)");
      }
      RETURN_IF_ERROR(tok->ParseModel(spec.at("model")));
      RETURN_IF_ERROR(tok->ParseAddedTokens(spec.value("added_tokens", nlohmann::json::array())));
      ASSIGN_OR_RETURN(tok->normalizer_,
                       ParseHfNormalizer(spec.value("normalizer", nlohmann::json())));
      ASSIGN_OR_RETURN(tok->pre_tokenizer_,
                       ParseHfPreTokenizer(spec.value("pre_tokenizer", nlohmann::json())));
      ASSIGN_OR_RETURN(tok->decoder_, ParseHfDecoder(spec.value("decoder", nlohmann::json())));
      RETURN_IF_ERROR(tok->ParsePostProcessor(spec.value("post_processor", nlohmann::json())));
      return absl::OkStatus();
    } catch (const nlohmann::json::exception& e) {
      return absl::InvalidArgumentError(absl::StrCat("malformed: ", e.what()));
    }
  }();
  if (!status.ok()) return StatusBuilder(status) << file;
  // tokenizer_config.json sits beside tokenizer.json in a model folder.
  const size_t slash = file.rfind('/');
  RETURN_IF_ERROR(tok->ResolveEod(folder                       ? path
                                  : slash == std::string::npos ? std::string(".")
                                                               : file.substr(0, slash)));
  return tok;
}

absl::Status HfTokenizer::ParseModel(const nlohmann::json& model) {
  const std::string type = model.value("type", std::string("BPE"));
  if (type != "BPE") {
    return absl::UnimplementedError(
        absl::StrCat("model type '", type,
                     "' is not supported: only BPE models (byte-level or "
                     "SentencePiece-style) are; WordPiece and Unigram files cannot be used"));
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(key) && !model[key].is_null() && !model[key].get<std::string>().empty()) {
      return absl::UnimplementedError(absl::StrCat("BPE option ", key, " is not supported"));
    }
  }
  if (model.contains("dropout") && !model["dropout"].is_null() &&
      model["dropout"].get<double>() != 0) {
    return absl::UnimplementedError("BPE dropout is not supported (it makes encoding random)");
  }
  const nlohmann::json& vocab = model.at("vocab");
  for (const auto& [token, id] : vocab.items()) {
    const int64_t i = id.get<int64_t>();
    if (i < 0 || i >= IdLimit(vocab.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("model.vocab: id ", i, " of '", token, "' is not in [0, ",
                       IdLimit(vocab.size()), "): a vocabulary's ids must be close to dense"));
    }
    vocab_.emplace(token, int32_t(i));
    if (size_t(i) >= id_to_token_.size()) id_to_token_.resize(i + 1);
    id_to_token_[i] = token;
  }
  ignore_merges_ = model.value("ignore_merges", false);
  byte_fallback_ = model.value("byte_fallback", false);
  fuse_unk_ = model.value("fuse_unk", false);
  if (model.contains("unk_token") && !model["unk_token"].is_null()) {
    const std::string unk = model["unk_token"].get<std::string>();
    auto it = vocab_.find(unk);
    if (it == vocab_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("model.unk_token '", unk, "' is not in the vocabulary"));
    }
    unk_id_ = it->second;
  }
  byte_ids_.fill(-1);
  for (int b = 0; b < 256; ++b) {
    auto it = vocab_.find(absl::StrFormat("<0x%02X>", b));
    if (it != vocab_.end()) byte_ids_[b] = it->second;
  }
  // Merges are "left right" strings (older files) or [left, right] pairs.
  int32_t rank = 0;
  for (const nlohmann::json& merge : model.at("merges")) {
    std::string left, right;
    if (merge.is_string()) {
      const std::string m = merge.get<std::string>();
      const size_t space = m.find(' ', 1);
      if (space == std::string::npos) {
        return absl::InvalidArgumentError(
            absl::StrCat("model.merges[", rank, "] '", m, "' is not two tokens"));
      }
      left = m.substr(0, space);
      right = m.substr(space + 1);
    } else {
      left = merge.at(0).get<std::string>();
      right = merge.at(1).get<std::string>();
    }
    auto l = vocab_.find(left), r = vocab_.find(right), result = vocab_.find(left + right);
    if (l == vocab_.end() || r == vocab_.end() || result == vocab_.end()) {
      return absl::InvalidArgumentError(absl::StrCat("model.merges[", rank, "] '", left, " ", right,
                                                     "' names a token not in the vocabulary"));
    }
    merges_.Add(l->second, r->second, rank++, result->second);
  }
  return absl::OkStatus();
}

absl::Status HfTokenizer::ParseAddedTokens(const nlohmann::json& added) {
  for (const nlohmann::json& t : added) {
    AddedToken token{t.at("content").get<std::string>(), t.at("id").get<int32_t>(),
                     t.value("lstrip", false), t.value("rstrip", false)};
    if (t.value("single_word", false)) {
      return absl::UnimplementedError(
          absl::StrCat("added token '", token.content, "': single_word is not supported"));
    }
    if (token.content.empty() || token.id < 0 ||
        token.id >= IdLimit(vocab_.size() + added.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("added token '", token.content, "' with id ", token.id, " is not valid"));
    }
    if (size_t(token.id) >= id_to_token_.size()) id_to_token_.resize(token.id + 1);
    id_to_token_[token.id] = token.content;
    added_.push_back(std::move(token));
  }
  for (int i = 0; i < int(added_.size()); ++i) {
    added_by_first_byte_[static_cast<unsigned char>(added_[i].content[0])].push_back(i);
  }
  for (auto& candidates : added_by_first_byte_) {
    std::stable_sort(candidates.begin(), candidates.end(), [&](int a, int b) {
      return added_[a].content.size() > added_[b].content.size();
    });
  }
  // The library counts distinct token strings; ids past that count (a gap)
  // still need embedding rows.
  absl::flat_hash_map<std::string, int32_t> all = vocab_;
  for (const AddedToken& t : added_) all.emplace(t.content, t.id);
  vocab_size_ = std::max<int64_t>(all.size(), id_to_token_.size());
  return absl::OkStatus();
}

absl::Status HfTokenizer::ParsePostProcessor(const nlohmann::json& spec) {
  if (spec.is_null()) return absl::OkStatus();
  const std::string type = spec.at("type").get<std::string>();
  if (type == "ByteLevel") return absl::OkStatus();  // it only trims offsets
  if (type == "Sequence") {
    for (const nlohmann::json& step : spec.at("processors"))
      RETURN_IF_ERROR(ParsePostProcessor(step));
    return absl::OkStatus();
  }
  if (type != "TemplateProcessing") {
    return absl::UnimplementedError(
        absl::StrCat("post-processor type '", type,
                     "' is not supported (supported: TemplateProcessing, ByteLevel, Sequence)"));
  }
  // The "single" template: special tokens around the sequence $A.
  std::vector<int32_t> prefix, suffix;
  bool seen_sequence = false;
  for (const nlohmann::json& item : spec.at("single")) {
    if (item.contains("Sequence")) {
      seen_sequence = true;
      continue;
    }
    const std::string name = item.at("SpecialToken").at("id").get<std::string>();
    const nlohmann::json& special = spec.at("special_tokens").at(name);
    std::vector<int32_t>& side = seen_sequence ? suffix : prefix;
    for (const nlohmann::json& id : special.at("ids")) side.push_back(id.get<int32_t>());
  }
  // A later processor wraps the output of the earlier ones.
  prefix_ids_.insert(prefix_ids_.begin(), prefix.begin(), prefix.end());
  suffix_ids_.insert(suffix_ids_.end(), suffix.begin(), suffix.end());
  return absl::OkStatus();
}

absl::Status HfTokenizer::ResolveEod(const std::string& folder) {
  ASSIGN_OR_RETURN(std::string eos, ConfigEosToken(folder));
  std::vector<std::string> candidates = {"<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>"};
  if (!eos.empty()) candidates = {eos};
  for (const std::string& c : candidates) {
    for (const AddedToken& t : added_) {
      if (t.content == c) {
        eod_ = t.id;
        return absl::OkStatus();
      }
    }
    auto it = vocab_.find(c);
    if (it != vocab_.end()) {
      eod_ = it->second;
      return absl::OkStatus();
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      path_, ": no end-of-document token: none of ", absl::StrJoin(candidates, ", "),
      " is in the vocabulary; pass the folder holding tokenizer.json and a tokenizer_config.json "
      "that names the \"eos_token\""));
}

void HfTokenizer::EncodeWord(absl::string_view word, std::vector<int32_t>* ids) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    auto it = vocab_.find(word);
    if (it != vocab_.end()) {
      ids->push_back(it->second);
      return;
    }
  }
  if (cache_.Lookup(word, ids)) return;
  // Characters to ids; a character outside the vocabulary becomes its <0xXX>
  // byte tokens (byte fallback) or the unknown token, which fuse_unk merges
  // across a run. As in the library, a pending unknown token is written only
  // when the next in-vocabulary character (or the end) comes.
  std::vector<int32_t> symbols;
  symbols.reserve(word.size());
  bool unk_pending = false;
  for (size_t i = 0; i < word.size();) {
    const size_t n = Utf8CharLength(word, i);
    const absl::string_view c = word.substr(i, n);
    i += n;
    auto it = vocab_.find(c);
    if (it != vocab_.end()) {
      if (unk_pending) symbols.push_back(unk_id_);
      unk_pending = false;
      symbols.push_back(it->second);
      continue;
    }
    if (byte_fallback_ && std::all_of(c.begin(), c.end(), [&](char b) {
          return byte_ids_[static_cast<unsigned char>(b)] >= 0;
        })) {
      for (char b : c) symbols.push_back(byte_ids_[static_cast<unsigned char>(b)]);
      continue;
    }
    if (unk_id_ >= 0) {
      if (unk_pending && !fuse_unk_) symbols.push_back(unk_id_);
      unk_pending = true;
    }
  }
  if (unk_pending) symbols.push_back(unk_id_);
  merges_.Apply(&symbols);
  cache_.Insert(word, symbols);
  ids->insert(ids->end(), symbols.begin(), symbols.end());
}

absl::Status HfTokenizer::EncodeStretch(absl::string_view text, bool at_start,
                                        std::vector<int32_t>* ids) const {
  std::vector<TextPiece> pieces(1);
  pieces[0].text = std::string(text);
  pieces[0].at_start = at_start;
  if (normalizer_ != nullptr) RETURN_IF_ERROR(normalizer_->Normalize(&pieces[0].text));
  if (pre_tokenizer_ != nullptr) RETURN_IF_ERROR(pre_tokenizer_->PreTokenize(&pieces));
  for (const TextPiece& p : pieces) EncodeWord(p.text, ids);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int32_t>> HfTokenizer::Tokenize(absl::string_view text) const {
  RETURN_IF_ERROR(CheckUtf8(text)) << path_;
  std::vector<int32_t> ids = prefix_ids_;
  ids.reserve(text.size() / 3 + prefix_ids_.size() + suffix_ids_.size() + 1);
  // Leftmost-longest matches of the added tokens; the text between them goes
  // through the model.
  size_t stretch_start = 0;
  for (size_t pos = 0; pos < text.size();) {
    const AddedToken* match = nullptr;
    for (int i : added_by_first_byte_[static_cast<unsigned char>(text[pos])]) {
      if (text.substr(pos).substr(0, added_[i].content.size()) == added_[i].content) {
        match = &added_[i];
        break;
      }
    }
    if (match == nullptr) {
      ++pos;
      continue;
    }
    size_t start = pos, end = pos + match->content.size();
    if (match->lstrip) {
      while (start > stretch_start && IsAsciiSpace(text[start - 1])) --start;
    }
    if (match->rstrip) {
      while (end < text.size() && IsAsciiSpace(text[end])) ++end;
    }
    if (start > stretch_start) {
      RETURN_IF_ERROR(EncodeStretch(text.substr(stretch_start, start - stretch_start),
                                    stretch_start == 0, &ids));
    }
    ids.push_back(match->id);
    stretch_start = pos = end;
  }
  if (stretch_start < text.size()) {
    RETURN_IF_ERROR(EncodeStretch(text.substr(stretch_start), stretch_start == 0, &ids));
  }
  ids.insert(ids.end(), suffix_ids_.begin(), suffix_ids_.end());
  return ids;
}

absl::StatusOr<std::string> HfTokenizer::Detokenize(absl::Span<const int32_t> ids) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    if (id < 0 || size_t(id) >= id_to_token_.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path_, ": id ", id, " is outside the vocabulary of ", vocab_size_));
    }
    tokens.push_back(id_to_token_[id]);
  }
  if (decoder_ == nullptr) return absl::StrJoin(tokens, " ");
  RETURN_IF_ERROR(decoder_->Decode(&tokens)) << path_;
  return absl::StrJoin(tokens, "");
}

}  // namespace conveyor
