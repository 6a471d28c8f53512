#include "data/tokenizers/hf_normalizers.h"

#include <unicode/locid.h>
#include <unicode/normalizer2.h>
#include <unicode/unistr.h>

#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "base/status_macros.h"
#include "data/tokenizers/hf_patterns.h"
#include "nlohmann/json.hpp"

namespace conveyor {
namespace {

// Unicode normalisation forms, through ICU's Normalizer2.
class UnicodeFormNormalizer : public HfNormalizer {
 public:
  explicit UnicodeFormNormalizer(const icu::Normalizer2* form) : form_(form) {}
  absl::Status Normalize(std::string* text) const override {
    UErrorCode status = U_ZERO_ERROR;
    const icu::UnicodeString in = icu::UnicodeString::fromUTF8(*text);
    if (form_->isNormalized(in, status) && U_SUCCESS(status)) return absl::OkStatus();
    status = U_ZERO_ERROR;
    const icu::UnicodeString out = form_->normalize(in, status);
    if (U_FAILURE(status)) {
      return absl::InternalError(
          absl::StrCat("Unicode normalisation failed: ", u_errorName(status)));
    }
    text->clear();
    out.toUTF8String(*text);
    return absl::OkStatus();
  }

 private:
  const icu::Normalizer2* form_;
};

// Rust's str::to_lowercase is the full Unicode lowercase mapping without
// locale rules: ICU's root locale.
class LowercaseNormalizer : public HfNormalizer {
 public:
  absl::Status Normalize(std::string* text) const override {
    icu::UnicodeString s = icu::UnicodeString::fromUTF8(*text);
    s.toLower(icu::Locale::getRoot());
    text->clear();
    s.toUTF8String(*text);
    return absl::OkStatus();
  }
};

class PrependNormalizer : public HfNormalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  absl::Status Normalize(std::string* text) const override {
    if (!text->empty()) text->insert(0, prefix_);  // the library leaves empty text alone
    return absl::OkStatus();
  }

 private:
  std::string prefix_;
};

class ReplaceNormalizer : public HfNormalizer {
 public:
  ReplaceNormalizer(std::unique_ptr<Pcre2Regex> pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  absl::Status Normalize(std::string* text) const override {
    ASSIGN_OR_RETURN(auto matches, pattern_->FindAll(*text));
    if (matches.empty()) return absl::OkStatus();
    std::string out;
    size_t last = 0;
    for (const auto& [start, end] : matches) {
      out.append(*text, last, start - last);
      out += content_;
      last = end;
    }
    out.append(*text, last, std::string::npos);
    *text = std::move(out);
    return absl::OkStatus();
  }

 private:
  std::unique_ptr<Pcre2Regex> pattern_;
  std::string content_;
};

class SequenceNormalizer : public HfNormalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<HfNormalizer>> steps)
      : steps_(std::move(steps)) {}
  absl::Status Normalize(std::string* text) const override {
    for (const auto& step : steps_) RETURN_IF_ERROR(step->Normalize(text));
    return absl::OkStatus();
  }

 private:
  std::vector<std::unique_ptr<HfNormalizer>> steps_;
};

absl::StatusOr<const icu::Normalizer2*> IcuForm(const std::string& type) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* form = type == "NFC"    ? icu::Normalizer2::getNFCInstance(status)
                                 : type == "NFD"  ? icu::Normalizer2::getNFDInstance(status)
                                 : type == "NFKC" ? icu::Normalizer2::getNFKCInstance(status)
                                                  : icu::Normalizer2::getNFKDInstance(status);
  if (U_FAILURE(status)) {
    return absl::InternalError(absl::StrCat("ICU has no ", type, " data: ", u_errorName(status)));
  }
  return form;
}

}  // namespace

absl::StatusOr<std::unique_ptr<HfNormalizer>> ParseHfNormalizer(const nlohmann::json& spec) {
  if (spec.is_null()) return std::unique_ptr<HfNormalizer>();
  const std::string type = spec.at("type").get<std::string>();
  if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
    ASSIGN_OR_RETURN(const icu::Normalizer2* form, IcuForm(type));
    return std::unique_ptr<HfNormalizer>(std::make_unique<UnicodeFormNormalizer>(form));
  }
  if (type == "Lowercase")
    return std::unique_ptr<HfNormalizer>(std::make_unique<LowercaseNormalizer>());
  if (type == "Prepend") {
    return std::unique_ptr<HfNormalizer>(
        std::make_unique<PrependNormalizer>(spec.at("prepend").get<std::string>()));
  }
  if (type == "Replace") {
    ASSIGN_OR_RETURN(std::unique_ptr<Pcre2Regex> pattern, ParseHfPattern(spec.at("pattern")),
                     _ << "normalizer Replace");
    return std::unique_ptr<HfNormalizer>(std::make_unique<ReplaceNormalizer>(
        std::move(pattern), spec.at("content").get<std::string>()));
  }
  if (type == "Sequence") {
    std::vector<std::unique_ptr<HfNormalizer>> steps;
    for (const nlohmann::json& step : spec.at("normalizers")) {
      ASSIGN_OR_RETURN(std::unique_ptr<HfNormalizer> s, ParseHfNormalizer(step));
      if (s != nullptr) steps.push_back(std::move(s));
    }
    return std::unique_ptr<HfNormalizer>(std::make_unique<SequenceNormalizer>(std::move(steps)));
  }
  return absl::UnimplementedError(absl::StrCat(
      "normalizer type '", type,
      "' is not supported (supported: NFC, NFD, NFKC, NFKD, Lowercase, Prepend, Replace, "
      "Sequence)"));
}

}  // namespace conveyor
