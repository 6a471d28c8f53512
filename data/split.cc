#include "data/split.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace conveyor {
namespace {

// Python 3's round(): ties go to the even neighbour.
int64_t RoundHalfEven(double x) {
  const double floor = std::floor(x);
  const double diff = x - floor;
  if (diff > 0.5) return int64_t(floor) + 1;
  if (diff < 0.5) return int64_t(floor);
  return int64_t(floor) % 2 == 0 ? int64_t(floor) : int64_t(floor) + 1;
}

}  // namespace

absl::StatusOr<SplitMatrix> ParseSplit(absl::string_view split) {
  const char sep = split.find('/') != absl::string_view::npos ? '/' : ',';
  std::vector<double> weights;
  for (absl::string_view part : absl::StrSplit(split, sep)) {
    double w;
    if (!absl::SimpleAtod(absl::StripAsciiWhitespace(part), &w) || !(w >= 0) || std::isinf(w)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--split \"", split, "\": '", part, "' is not a non-negative number"));
    }
    weights.push_back(w);
  }
  if (weights.size() > 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("--split \"", split, "\": at most three parts (train, valid, test)"));
  }
  weights.resize(3, 0.0);
  const double total = weights[0] + weights[1] + weights[2];
  if (!(total > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--split \"", split, "\": the weights must sum to something positive"));
  }
  SplitMatrix matrix;
  double begin = 0;
  for (int i = 0; i < 3; ++i) {
    const double end = begin + weights[i] / total;
    if (weights[i] > 0) matrix[i] = std::make_pair(begin, end);
    begin = end;
  }
  return matrix;
}

std::array<std::optional<std::pair<int64_t, int64_t>>, 3> SplitRanges(const SplitMatrix& matrix,
                                                                      int64_t num_elements) {
  std::array<std::optional<std::pair<int64_t, int64_t>>, 3> ranges;
  for (int i = 0; i < 3; ++i) {
    if (!matrix[i]) continue;
    ranges[i] = std::make_pair(RoundHalfEven(matrix[i]->first * double(num_elements)),
                               RoundHalfEven(matrix[i]->second * double(num_elements)));
  }
  return ranges;
}

}  // namespace conveyor
