#include "data/tokenizers/hf_pre_tokenizers.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "data/tokenizers/byte_level.h"
#include "data/tokenizers/hf_patterns.h"
#include "data/tokenizers/pcre2_regex.h"
#include "nlohmann/json.hpp"

namespace conveyor {
namespace {

// GPT-2's split pattern, which ByteLevel applies when use_regex is true.
constexpr char kGpt2Pattern[] =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// What becomes of the matched spans, as tokenizers' SplitDelimiterBehavior.
enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

absl::StatusOr<Behavior> ParseBehavior(const std::string& name) {
  if (name == "Removed") return Behavior::kRemoved;
  if (name == "Isolated") return Behavior::kIsolated;
  if (name == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return Behavior::kMergedWithNext;
  if (name == "Contiguous") return Behavior::kContiguous;
  return absl::InvalidArgumentError(absl::StrCat("Split behavior '", name, "' is not known"));
}

struct Span {
  size_t start, end;
  bool is_match;
};

// Splits `piece` at the matches of `regex`, grouping spans as `behavior`
// says, the way NormalizedString::split of tokenizers does; empty pieces are
// dropped. Appends the results to `out`.
absl::Status SplitPiece(const TextPiece& piece, const Pcre2Regex& regex, Behavior behavior,
                        bool invert, std::vector<TextPiece>* out) {
  ASSIGN_OR_RETURN(auto matches, regex.FindAll(piece.text));
  // Matched and unmatched spans, in order, covering the whole text.
  std::vector<Span> spans;
  size_t last = 0;
  for (const auto& [start, end] : matches) {
    if (start > last) spans.push_back({last, start, invert});
    spans.push_back({start, end, !invert});
    last = end;
  }
  if (last < piece.text.size()) spans.push_back({last, piece.text.size(), invert});

  std::vector<Span> grouped;
  bool previous_match = false;
  switch (behavior) {
    case Behavior::kRemoved:
      for (const Span& s : spans) {
        if (!s.is_match) grouped.push_back(s);
      }
      break;
    case Behavior::kIsolated:
      grouped = spans;
      break;
    case Behavior::kMergedWithPrevious:
      for (const Span& s : spans) {
        if (s.is_match && !previous_match && !grouped.empty()) {
          grouped.back().end = s.end;
        } else {
          grouped.push_back(s);
        }
        previous_match = s.is_match;
      }
      break;
    case Behavior::kMergedWithNext:
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->is_match && !previous_match && !grouped.empty()) {
          grouped.back().start = it->start;
        } else {
          grouped.push_back(*it);
        }
        previous_match = it->is_match;
      }
      std::reverse(grouped.begin(), grouped.end());
      break;
    case Behavior::kContiguous:
      for (const Span& s : spans) {
        if (s.is_match == previous_match && !grouped.empty()) {
          grouped.back().end = s.end;
        } else {
          grouped.push_back(s);
        }
        previous_match = s.is_match;
      }
      break;
  }
  for (const Span& s : grouped) {
    if (s.end == s.start) continue;
    out->push_back({piece.text.substr(s.start, s.end - s.start), piece.at_start && s.start == 0});
  }
  return absl::OkStatus();
}

absl::Status SplitAll(const Pcre2Regex& regex, Behavior behavior, bool invert,
                      std::vector<TextPiece>* pieces) {
  std::vector<TextPiece> out;
  out.reserve(pieces->size() * 4);
  for (const TextPiece& p : *pieces) RETURN_IF_ERROR(SplitPiece(p, regex, behavior, invert, &out));
  *pieces = std::move(out);
  return absl::OkStatus();
}

class SplitPreTokenizer : public HfPreTokenizer {
 public:
  SplitPreTokenizer(std::unique_ptr<Pcre2Regex> regex, Behavior behavior, bool invert)
      : regex_(std::move(regex)), behavior_(behavior), invert_(invert) {}
  absl::Status PreTokenize(std::vector<TextPiece>* pieces) const override {
    return SplitAll(*regex_, behavior_, invert_, pieces);
  }

 private:
  std::unique_ptr<Pcre2Regex> regex_;
  Behavior behavior_;
  bool invert_;
};

// Optionally a space before each piece and GPT-2's split, then each byte
// replaced by its stand-in character (byte_level.h).
class ByteLevelPreTokenizer : public HfPreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, std::unique_ptr<Pcre2Regex> regex)
      : add_prefix_space_(add_prefix_space), regex_(std::move(regex)) {}
  absl::Status PreTokenize(std::vector<TextPiece>* pieces) const override {
    if (add_prefix_space_) {
      for (TextPiece& p : *pieces) {
        if (!absl::StartsWith(p.text, " ")) p.text.insert(0, " ");
      }
    }
    if (regex_ != nullptr) RETURN_IF_ERROR(SplitAll(*regex_, Behavior::kIsolated, false, pieces));
    std::string mapped;
    for (TextPiece& p : *pieces) {
      mapped.clear();
      AppendByteLevelChars(p.text, &mapped);
      p.text.swap(mapped);
    }
    return absl::OkStatus();
  }

 private:
  bool add_prefix_space_;
  std::unique_ptr<Pcre2Regex> regex_;  // nullptr: use_regex false
};

// SentencePiece's word marking: spaces become the replacement character
// (U+2581 '▁'), one is prepended as prepend_scheme says, and with split the
// text is cut before each replacement character.
class MetaspacePreTokenizer : public HfPreTokenizer {
 public:
  enum class Prepend { kAlways, kNever, kFirst };
  MetaspacePreTokenizer(std::string replacement, Prepend prepend, std::unique_ptr<Pcre2Regex> split)
      : replacement_(std::move(replacement)), prepend_(prepend), split_(std::move(split)) {}
  absl::Status PreTokenize(std::vector<TextPiece>* pieces) const override {
    for (TextPiece& p : *pieces) {
      std::string replaced;
      replaced.reserve(p.text.size() + replacement_.size());
      for (char c : p.text) {
        if (c == ' ') {
          replaced += replacement_;
        } else {
          replaced.push_back(c);
        }
      }
      const bool prepend =
          prepend_ == Prepend::kAlways || (prepend_ == Prepend::kFirst && p.at_start);
      if (prepend && !absl::StartsWith(replaced, replacement_)) replaced.insert(0, replacement_);
      p.text = std::move(replaced);
    }
    if (split_ != nullptr) return SplitAll(*split_, Behavior::kMergedWithNext, false, pieces);
    return absl::OkStatus();
  }

 private:
  std::string replacement_;
  Prepend prepend_;
  std::unique_ptr<Pcre2Regex> split_;  // the replacement as a literal; nullptr without split
};

class SequencePreTokenizer : public HfPreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<HfPreTokenizer>> steps)
      : steps_(std::move(steps)) {}
  absl::Status PreTokenize(std::vector<TextPiece>* pieces) const override {
    for (const auto& step : steps_) RETURN_IF_ERROR(step->PreTokenize(pieces));
    return absl::OkStatus();
  }

 private:
  std::vector<std::unique_ptr<HfPreTokenizer>> steps_;
};

absl::StatusOr<std::unique_ptr<HfPreTokenizer>> ParseMetaspace(const nlohmann::json& spec) {
  const std::string replacement = spec.at("replacement").get<std::string>();
  MetaspacePreTokenizer::Prepend prepend;
  if (spec.contains("prepend_scheme")) {
    const std::string scheme = spec.at("prepend_scheme").get<std::string>();
    if (scheme == "always") {
      prepend = MetaspacePreTokenizer::Prepend::kAlways;
    } else if (scheme == "never") {
      prepend = MetaspacePreTokenizer::Prepend::kNever;
    } else if (scheme == "first") {
      prepend = MetaspacePreTokenizer::Prepend::kFirst;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("Metaspace prepend_scheme '", scheme, "' is not always, never or first"));
    }
  } else {
    // Files older than prepend_scheme say add_prefix_space.
    prepend = spec.value("add_prefix_space", true) ? MetaspacePreTokenizer::Prepend::kAlways
                                                   : MetaspacePreTokenizer::Prepend::kNever;
  }
  std::unique_ptr<Pcre2Regex> split;
  if (spec.value("split", true)) {
    ASSIGN_OR_RETURN(split, Pcre2Regex::Compile(replacement, /*literal=*/true));
  }
  return std::unique_ptr<HfPreTokenizer>(
      std::make_unique<MetaspacePreTokenizer>(replacement, prepend, std::move(split)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<HfPreTokenizer>> ParseHfPreTokenizer(const nlohmann::json& spec) {
  if (spec.is_null()) return std::unique_ptr<HfPreTokenizer>();
  const std::string type = spec.at("type").get<std::string>();
  if (type == "Split") {
    ASSIGN_OR_RETURN(std::unique_ptr<Pcre2Regex> regex, ParseHfPattern(spec.at("pattern")),
                     _ << "pre-tokenizer Split");
    ASSIGN_OR_RETURN(Behavior behavior, ParseBehavior(spec.at("behavior").get<std::string>()));
    return std::unique_ptr<HfPreTokenizer>(std::make_unique<SplitPreTokenizer>(
        std::move(regex), behavior, spec.value("invert", false)));
  }
  if (type == "ByteLevel") {
    std::unique_ptr<Pcre2Regex> regex;
    if (spec.value("use_regex", true)) {
      ASSIGN_OR_RETURN(regex, Pcre2Regex::Compile(kGpt2Pattern));
    }
    return std::unique_ptr<HfPreTokenizer>(std::make_unique<ByteLevelPreTokenizer>(
        spec.value("add_prefix_space", false), std::move(regex)));
  }
  if (type == "Metaspace") return ParseMetaspace(spec);
  if (type == "Digits") {
    // char::is_numeric: the Unicode N categories.
    ASSIGN_OR_RETURN(std::unique_ptr<Pcre2Regex> regex, Pcre2Regex::Compile(R"(\p{N})"));
    const Behavior behavior =
        spec.value("individual_digits", false) ? Behavior::kIsolated : Behavior::kContiguous;
    return std::unique_ptr<HfPreTokenizer>(
        std::make_unique<SplitPreTokenizer>(std::move(regex), behavior, false));
  }
  if (type == "Sequence") {
    std::vector<std::unique_ptr<HfPreTokenizer>> steps;
    for (const nlohmann::json& step : spec.at("pretokenizers")) {
      ASSIGN_OR_RETURN(std::unique_ptr<HfPreTokenizer> s, ParseHfPreTokenizer(step));
      if (s != nullptr) steps.push_back(std::move(s));
    }
    return std::unique_ptr<HfPreTokenizer>(
        std::make_unique<SequencePreTokenizer>(std::move(steps)));
  }
  return absl::UnimplementedError(absl::StrCat(
      "pre-tokenizer type '", type,
      "' is not supported (supported: Split, ByteLevel, Metaspace, Digits, Sequence)"));
}

}  // namespace conveyor
