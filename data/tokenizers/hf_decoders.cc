#include "data/tokenizers/hf_decoders.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "base/status_macros.h"
#include "data/tokenizers/byte_level.h"
#include "data/tokenizers/hf_patterns.h"
#include "data/tokenizers/utf8_text.h"
#include "nlohmann/json.hpp"

namespace conveyor {
namespace {

constexpr char kReplacementChar[] = "\xEF\xBF\xBD";  // U+FFFD

// Stand-in characters back to bytes; a token holding any other character is
// kept as its UTF-8 text (added tokens). One token out, lossily decoded.
class ByteLevelDecoder : public HfDecoder {
 public:
  absl::Status Decode(std::vector<std::string>* tokens) const override {
    std::string bytes, token_bytes;
    for (const std::string& t : *tokens) {
      if (ByteLevelBytes(t, &token_bytes)) {
        bytes += token_bytes;
      } else {
        bytes += t;
      }
    }
    *tokens = {Utf8Lossy(bytes)};
    return absl::OkStatus();
  }
};

class ReplaceDecoder : public HfDecoder {
 public:
  ReplaceDecoder(std::unique_ptr<Pcre2Regex> pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  absl::Status Decode(std::vector<std::string>* tokens) const override {
    for (std::string& t : *tokens) {
      ASSIGN_OR_RETURN(auto matches, pattern_->FindAll(t));
      std::string out;
      size_t last = 0;
      for (const auto& [start, end] : matches) {
        absl::StrAppend(&out, absl::string_view(t).substr(last, start - last), content_);
        last = end;
      }
      out.append(t, last, std::string::npos);
      t = std::move(out);
    }
    return absl::OkStatus();
  }

 private:
  std::unique_ptr<Pcre2Regex> pattern_;
  std::string content_;
};

// Runs of <0xXX> tokens become the text their bytes spell, or one U+FFFD per
// token when those bytes are not valid UTF-8.
class ByteFallbackDecoder : public HfDecoder {
 public:
  absl::Status Decode(std::vector<std::string>* tokens) const override {
    std::vector<std::string> out;
    std::string bytes;
    int byte_tokens = 0;
    auto flush = [&] {
      if (byte_tokens == 0) return;
      if (CheckUtf8(bytes).ok()) {
        out.push_back(bytes);
      } else {
        for (int i = 0; i < byte_tokens; ++i) out.push_back(kReplacementChar);
      }
      bytes.clear();
      byte_tokens = 0;
    };
    for (std::string& t : *tokens) {
      uint32_t byte;
      if (t.size() == 6 && absl::StartsWith(t, "<0x") && t.back() == '>' &&
          absl::SimpleHexAtoi(absl::string_view(t).substr(3, 2), &byte)) {
        bytes.push_back(char(byte));
        ++byte_tokens;
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    *tokens = std::move(out);
    return absl::OkStatus();
  }
};

class FuseDecoder : public HfDecoder {
 public:
  absl::Status Decode(std::vector<std::string>* tokens) const override {
    *tokens = {absl::StrJoin(*tokens, "")};
    return absl::OkStatus();
  }
};

// Removes up to `start` leading and `stop` trailing `content` characters
// from each token.
class StripDecoder : public HfDecoder {
 public:
  StripDecoder(std::string content, int start, int stop)
      : content_(std::move(content)), start_(start), stop_(stop) {}
  absl::Status Decode(std::vector<std::string>* tokens) const override {
    for (std::string& t : *tokens) {
      absl::string_view v = t;
      for (int i = 0; i < start_ && absl::ConsumePrefix(&v, content_); ++i) {
      }
      for (int i = 0; i < stop_ && absl::ConsumeSuffix(&v, content_); ++i) {
      }
      t = std::string(v);
    }
    return absl::OkStatus();
  }

 private:
  std::string content_;
  int start_, stop_;
};

// The replacement character back to spaces; in the first token it is
// dropped instead (all of them, as the library does) unless nothing was
// prepended.
class MetaspaceDecoder : public HfDecoder {
 public:
  MetaspaceDecoder(std::string replacement, bool prepends)
      : replacement_(std::move(replacement)), prepends_(prepends) {}
  absl::Status Decode(std::vector<std::string>* tokens) const override {
    for (size_t i = 0; i < tokens->size(); ++i) {
      std::string& t = (*tokens)[i];
      t = absl::StrReplaceAll(t, {{replacement_, i == 0 && prepends_ ? "" : " "}});
    }
    return absl::OkStatus();
  }

 private:
  std::string replacement_;
  bool prepends_;
};

class SequenceDecoder : public HfDecoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<HfDecoder>> steps)
      : steps_(std::move(steps)) {}
  absl::Status Decode(std::vector<std::string>* tokens) const override {
    for (const auto& step : steps_) RETURN_IF_ERROR(step->Decode(tokens));
    return absl::OkStatus();
  }

 private:
  std::vector<std::unique_ptr<HfDecoder>> steps_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<HfDecoder>> ParseHfDecoder(const nlohmann::json& spec) {
  if (spec.is_null()) return std::unique_ptr<HfDecoder>();
  const std::string type = spec.at("type").get<std::string>();
  std::unique_ptr<HfDecoder> decoder;
  if (type == "ByteLevel") {
    decoder = std::make_unique<ByteLevelDecoder>();
  } else if (type == "Replace") {
    ASSIGN_OR_RETURN(std::unique_ptr<Pcre2Regex> pattern, ParseHfPattern(spec.at("pattern")),
                     _ << "decoder Replace");
    decoder =
        std::make_unique<ReplaceDecoder>(std::move(pattern), spec.at("content").get<std::string>());
  } else if (type == "ByteFallback") {
    decoder = std::make_unique<ByteFallbackDecoder>();
  } else if (type == "Fuse") {
    decoder = std::make_unique<FuseDecoder>();
  } else if (type == "Strip") {
    decoder =
        std::make_unique<StripDecoder>(spec.at("content").get<std::string>(),
                                       spec.at("start").get<int>(), spec.at("stop").get<int>());
  } else if (type == "Metaspace") {
    const bool prepends = spec.contains("prepend_scheme")
                              ? spec.at("prepend_scheme").get<std::string>() != "never"
                              : spec.value("add_prefix_space", true);
    decoder =
        std::make_unique<MetaspaceDecoder>(spec.at("replacement").get<std::string>(), prepends);
  } else if (type == "Sequence") {
    std::vector<std::unique_ptr<HfDecoder>> steps;
    for (const nlohmann::json& step : spec.at("decoders")) {
      ASSIGN_OR_RETURN(std::unique_ptr<HfDecoder> s, ParseHfDecoder(step));
      if (s != nullptr) steps.push_back(std::move(s));
    }
    decoder = std::make_unique<SequenceDecoder>(std::move(steps));
  } else {
    return absl::UnimplementedError(absl::StrCat(
        "decoder type '", type,
        "' is not supported (supported: ByteLevel, Replace, ByteFallback, Fuse, Strip, "
        "Metaspace, Sequence)"));
  }
  return decoder;
}

}  // namespace conveyor
