#include "parallel/pipeline/bubble.h"

#include <algorithm>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace conveyor {
namespace pipeline {

double PipelineBubble(int P, int M) {
  return static_cast<double>(P - 1) / (static_cast<double>(M) + P - 1);
}

double InterleavedBubble(int P, int V, int M) {
  return static_cast<double>(P - 1) / (static_cast<double>(V) * M + P - 1);
}

double ZeroBubbleH1Bubble(int P, int M, double f, double b, double w) {
  const double idle = (P - 1) * std::max(f + b - w, 0.0);
  return idle / (M * (f + b + w) + idle);
}

absl::StatusOr<double> PredictedBubble(absl::string_view schedule, int P, int V, int M) {
  if (schedule == "gpipe" || schedule == "1f1b") return PipelineBubble(P, M);
  if (schedule == "interleaved-1f1b") return InterleavedBubble(P, V, M);
  if (schedule == "zb-h1" || schedule == "zb-h2") return ZeroBubbleH1Bubble(P, M, 1, 1, 1);
  if (schedule == "zbv") return static_cast<double>(P - 1) / (6.0 * M + P - 1);
  return absl::NotFoundError(absl::StrCat("no bubble formula for schedule '", schedule, "'"));
}

absl::StatusOr<int> PeakStashed(absl::string_view schedule, int P, int V, int M, int rank) {
  if (schedule == "gpipe") return M;
  if (schedule == "1f1b") return std::min(P - rank, M);
  if (schedule == "interleaved-1f1b") {
    return static_cast<int>(
        std::min<int64_t>(2 * (P - 1 - rank) + (V - 1) * P + 1, int64_t{V} * M));
  }
  if (schedule == "zb-h1") return std::min(P, M);
  if (schedule == "zb-h2") return std::min(2 * P - 1, M);
  if (schedule == "zbv") return static_cast<int>(std::min<int64_t>(2 * P, int64_t{2} * M));
  return absl::NotFoundError(absl::StrCat("no memory formula for schedule '", schedule, "'"));
}

}  // namespace pipeline
}  // namespace conveyor
