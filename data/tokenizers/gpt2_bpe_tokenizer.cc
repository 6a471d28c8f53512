#include "data/tokenizers/gpt2_bpe_tokenizer.h"

#include <climits>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "data/mapped_file.h"
#include "data/python_json.h"
#include "data/tokenizers/byte_level.h"
#include "data/tokenizers/gpt2_pretokenizer.h"

namespace conveyor {
namespace {

constexpr size_t kMaxCacheEntries = 1 << 20;

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file, MappedFile::Open(path));
  return std::string(file->data(), file->size());
}

// Splits a UTF-8 string into its characters.
std::vector<std::string> Utf8Chars(absl::string_view s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char b = static_cast<unsigned char>(s[i]);
    size_t len = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : 4;
    len = std::min(len, s.size() - i);
    out.emplace_back(s.substr(i, len));
    i += len;
  }
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Gpt2BpeTokenizer>> Gpt2BpeTokenizer::Load(
    const std::string& vocab_file, const std::string& merges_file) {
  auto tok = std::unique_ptr<Gpt2BpeTokenizer>(new Gpt2BpeTokenizer());

  ASSIGN_OR_RETURN(std::string vocab_text, ReadFile(vocab_file));
  // Unordered: an ordered object of 50k members is slow to build.
  absl::StatusOr<nlohmann::json> vocab = ParseJson<nlohmann::json>(vocab_text);
  if (!vocab.ok() || !vocab->is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(vocab_file, ": not a JSON object of token -> id",
                     vocab.ok() ? "" : absl::StrCat(" (", vocab.status().message(), ")")));
  }
  tok->decoder_.resize(vocab->size());
  for (const auto& [token, id_value] : vocab->items()) {
    const int64_t id = id_value.is_number() ? id_value.get<int64_t>() : -1;
    if (id < 0 || id >= int64_t(vocab->size())) {
      return absl::InvalidArgumentError(absl::StrCat(vocab_file, ": id of token '", token,
                                                     "' is not in [0, ", vocab->size(), ")"));
    }
    tok->encoder_[token] = int32_t(id);
    tok->decoder_[id] = token;
  }
  auto eod = tok->encoder_.find("<|endoftext|>");
  if (eod == tok->encoder_.end()) {
    return absl::InvalidArgumentError(absl::StrCat(vocab_file, ": no <|endoftext|> token"));
  }
  tok->eod_ = eod->second;

  ASSIGN_OR_RETURN(std::string merges_text, ReadFile(merges_file));
  int line_number = 0;
  int rank = 0;
  for (absl::string_view line : absl::StrSplit(merges_text, '\n')) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || (line_number == 1 && absl::StartsWith(line, "#version"))) continue;
    std::vector<absl::string_view> parts = absl::StrSplit(line, ' ');
    if (parts.size() != 2 || parts[0].empty() || parts[1].empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          merges_file, ":", line_number, ": expected two symbols separated by one space"));
    }
    tok->merge_ranks_.emplace(std::string(line), rank++);
  }
  return tok;
}

std::vector<int32_t> Gpt2BpeTokenizer::Bpe(absl::string_view word) const {
  std::vector<std::string> symbols = Utf8Chars(word);
  // Repeatedly merge the adjacent pair with the lowest rank (everywhere it
  // occurs), until no adjacent pair is a known merge.
  std::string key;
  while (symbols.size() > 1) {
    int best_rank = INT_MAX;
    std::string best_left, best_right;
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
      key = absl::StrCat(symbols[i], " ", symbols[i + 1]);
      auto it = merge_ranks_.find(key);
      if (it != merge_ranks_.end() && it->second < best_rank) {
        best_rank = it->second;
        best_left = symbols[i];
        best_right = symbols[i + 1];
      }
    }
    if (best_rank == INT_MAX) break;
    std::vector<std::string> merged;
    merged.reserve(symbols.size());
    for (size_t i = 0; i < symbols.size(); ++i) {
      if (i + 1 < symbols.size() && symbols[i] == best_left && symbols[i + 1] == best_right) {
        merged.push_back(best_left + best_right);
        ++i;
      } else {
        merged.push_back(std::move(symbols[i]));
      }
    }
    symbols = std::move(merged);
  }
  std::vector<int32_t> ids;
  ids.reserve(symbols.size());
  for (const std::string& s : symbols) {
    auto it = encoder_.find(s);
    if (it != encoder_.end()) {
      ids.push_back(it->second);
    } else {
      // Every single byte stand-in is in GPT-2's vocabulary; a custom
      // vocabulary without one falls back to its bytes, one by one.
      for (const std::string& c : Utf8Chars(s)) {
        auto byte = encoder_.find(c);
        if (byte != encoder_.end()) ids.push_back(byte->second);
      }
    }
  }
  return ids;
}

void Gpt2BpeTokenizer::EncodeWord(absl::string_view word, std::vector<int32_t>* out) const {
  std::string mapped;
  mapped.reserve(word.size() * 2);
  AppendByteLevelChars(word, &mapped);
  {
    absl::MutexLock lock(&cache_mu_);
    auto it = cache_.find(mapped);
    if (it != cache_.end()) {
      out->insert(out->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> ids = Bpe(mapped);
  out->insert(out->end(), ids.begin(), ids.end());
  absl::MutexLock lock(&cache_mu_);
  if (cache_.size() >= kMaxCacheEntries) cache_.clear();
  cache_.emplace(std::move(mapped), std::move(ids));
}

absl::StatusOr<std::vector<int32_t>> Gpt2BpeTokenizer::Tokenize(absl::string_view text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 1);
  for (absl::string_view word : Gpt2PreTokenize(text)) EncodeWord(word, &ids);
  return ids;
}

absl::StatusOr<std::string> Gpt2BpeTokenizer::Detokenize(absl::Span<const int32_t> ids) const {
  std::string text;
  for (int32_t id : ids) {
    if (id < 0 || id >= int32_t(decoder_.size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "GPT-2 tokenizer: id ", id, " is outside the vocabulary of ", decoder_.size()));
    }
    std::string byte;
    for (const std::string& c : Utf8Chars(decoder_[id])) {
      // A stand-in decodes to its byte; any other character stays as it is.
      text += ByteLevelBytes(c, &byte) ? byte : c;
    }
  }
  return text;
}

}  // namespace conveyor
