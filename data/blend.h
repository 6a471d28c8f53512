// A blend: the dataset prefixes named by --data-path (or one of
// --train/valid/test-data-path) and their optional weights, parsed as
// Megatron's get_blend_from_list reads them: "p1 p2" (no weights) or
// "w1 p1 w2 p2" (weight/prefix pairs).
#ifndef CONVEYOR_DATA_BLEND_H_
#define CONVEYOR_DATA_BLEND_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace conveyor {

struct Blend {
  std::vector<std::string> prefixes;
  // One weight per prefix as given (not normalised); empty when unweighted.
  std::vector<double> weights;

  bool weighted() const { return !weights.empty(); }
};

// `words` are the flag's values. A value is one prefix, taken whole (spaces
// and all, trimmed as Megatron trims it: "my data/corpus_text_document"),
// unless it starts with a number: then it holds a list ("0.3 a 0.7 b" passed
// as one string, or a config file's one string), and each whitespace-separated
// number in it is a weight and the text between two numbers one prefix. As in
// Megatron, an odd count means prefixes only, and an even count is read as
// pairs when every other word is a number. Errors name `flag`: no prefixes,
// an odd count that starts with a number (a blend missing a word; Megatron
// would look for a dataset named "0.3"), a mix of numbers and names where
// weights belong, or weights that are negative or sum to zero. Config
// validation reports these errors before a run starts.
absl::StatusOr<Blend> ParseBlend(absl::Span<const std::string> words, absl::string_view flag);

// Megatron's utils.normalize: w / sum(w) in double, summed left to right (as
// numpy does for the handful of weights a blend has).
std::vector<double> NormalizeWeights(absl::Span<const double> weights);

}  // namespace conveyor

#endif  // CONVEYOR_DATA_BLEND_H_
