#include "data/blend.h"

#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace conveyor {

absl::StatusOr<Blend> ParseBlend(absl::Span<const std::string> words, absl::string_view flag) {
  std::vector<std::string> parts;
  for (const std::string& w : words) {
    for (absl::string_view p : absl::StrSplit(w, absl::ByAnyChar(" \t\n"), absl::SkipEmpty())) {
      parts.emplace_back(p);
    }
  }
  if (parts.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " names no dataset prefix"));
  }
  Blend blend;
  double first;
  if (parts.size() % 2 == 1) {
    // Megatron reads an odd count as prefixes only; a list that starts with a number
    // is a blend missing a prefix or a weight, never a dataset called "0.3".
    if (absl::SimpleAtod(parts[0], &first)) {
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
