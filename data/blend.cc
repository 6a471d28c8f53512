#include "data/blend.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace conveyor {
namespace {

constexpr char kWhitespace[] = " \t\n";

bool IsNumber(absl::string_view word) {
  double unused;
  return absl::SimpleAtod(word, &unused);
}

// The items of one flag value (see ParseBlend): the value whole, or, when it
// starts with a number, its numbers and the text between them.
void AppendItems(absl::string_view value, std::vector<std::string>* items) {
  value = absl::StripAsciiWhitespace(value);
  if (value.empty()) return;
  if (!IsNumber(value.substr(0, value.find_first_of(kWhitespace)))) {
    items->emplace_back(value);
    return;
  }
  size_t path_begin = absl::string_view::npos, path_end = 0;
  auto end_path = [&] {
    if (path_begin == absl::string_view::npos) return;
    items->emplace_back(value.substr(path_begin, path_end - path_begin));
    path_begin = absl::string_view::npos;
  };
  for (size_t at = value.find_first_not_of(kWhitespace); at != absl::string_view::npos;
       at = value.find_first_not_of(kWhitespace, at)) {
    const size_t end = std::min(value.find_first_of(kWhitespace, at), value.size());
    const absl::string_view word = value.substr(at, end - at);
    if (IsNumber(word)) {
      end_path();
      items->emplace_back(word);
    } else {
      if (path_begin == absl::string_view::npos) path_begin = at;
      path_end = end;
    }
    at = end;
  }
  end_path();
}

}  // namespace

absl::StatusOr<Blend> ParseBlend(absl::Span<const std::string> words, absl::string_view flag) {
  std::vector<std::string> parts;
  for (const std::string& w : words) AppendItems(w, &parts);
  if (parts.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " names no dataset prefix"));
  }
  Blend blend;
  if (parts.size() % 2 == 1) {
    // Megatron reads an odd count as prefixes only; a list that starts with a number
    // is a blend missing a prefix or a weight, never a dataset called "0.3".
    if (IsNumber(parts[0])) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, " starts with a weight, so it must hold weight/prefix pairs (", flag,
                       " 0.3 a 0.7 b); got ", parts.size(), " values"));
    }
    blend.prefixes = std::move(parts);
    return blend;
  }
  // Even count: weight/prefix pairs if the would-be weights are numbers.
  int numbers = 0;
  std::vector<double> weights;
  for (size_t i = 0; i < parts.size(); i += 2) {
    double w;
    if (absl::SimpleAtod(parts[i], &w)) {
      ++numbers;
      weights.push_back(w);
    }
  }
  if (numbers == 0) {
    blend.prefixes = std::move(parts);
    return blend;
  }
  if (numbers != int(parts.size() / 2)) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " mixes weights and prefixes: give either prefixes only (", flag,
                     " a b) or weight/prefix pairs (", flag, " 0.3 a 0.7 b)"));
  }
  double sum = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (!(weights[i] >= 0) || !std::isfinite(weights[i])) {
      return absl::InvalidArgumentError(absl::StrCat(flag, " weight '", parts[2 * i], "' of ",
                                                     parts[2 * i + 1],
                                                     " must be a non-negative number"));
    }
    sum += weights[i];
  }
  if (!(sum > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " weights sum to 0: at least one dataset needs a positive weight"));
  }
  for (size_t i = 1; i < parts.size(); i += 2) blend.prefixes.push_back(parts[i]);
  blend.weights = std::move(weights);
  return blend;
}

std::vector<double> NormalizeWeights(absl::Span<const double> weights) {
  double sum = 0;
  for (double w : weights) sum += w;
  std::vector<double> out(weights.begin(), weights.end());
  for (double& w : out) w /= sum;
  return out;
}

}  // namespace conveyor
