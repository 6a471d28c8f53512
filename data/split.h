// Megatron's --split (e.g. "949,50,1"): how one dataset's sequences divide
// into train, validation and test.
#ifndef CONVEYOR_DATA_SPLIT_H_
#define CONVEYOR_DATA_SPLIT_H_

#include <array>
#include <cstdint>
#include <optional>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace conveyor {

// [begin, end) fractions of the dataset per split (train, valid, test);
// nullopt for a split with weight 0, which Megatron does not build.
using SplitMatrix = std::array<std::optional<std::pair<double, double>>, 3>;

// Parses "a,b,c" or "a/b/c" (missing parts are 0) into cumulative fractions.
// Errors name --split: a malformed or negative number, more than three parts,
// or weights that do not sum to something positive.
absl::StatusOr<SplitMatrix> ParseSplit(absl::string_view split);

// The sequence-id range [begin, end) of each split for a dataset of
// `num_elements` sequences, rounding as Python's round() does (half to even).
std::array<std::optional<std::pair<int64_t, int64_t>>, 3> SplitRanges(const SplitMatrix& matrix,
                                                                      int64_t num_elements);

}  // namespace conveyor

#endif  // CONVEYOR_DATA_SPLIT_H_
