// GPipe and 1F1B, the two schedules with one chunk per rank and a fused backward.
#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "parallel/pipeline/compute_order.h"

namespace conveyor {
namespace pipeline {
namespace {

absl::Status RequireOneChunk(const char* schedule, int V) {
  if (V == 1) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "pipeline schedule ", schedule, " runs one model chunk per rank, got V=", V,
      " virtual stages per rank; use --pipeline-schedule=interleaved-1f1b (or zbv for V=2)"));
}

}  // namespace

absl::StatusOr<ComputeOrder> GpipeOrder(int P, int V, int M) {
  RETURN_IF_ERROR(RequireOneChunk("gpipe", V));
  ComputeOrder order(P);
  for (std::vector<Action>& actions : order) {
    for (int m = 0; m < M; ++m) actions.push_back(Forward(m));
    // Reverse order: the last stage's newest activation is the first gradient it can
    // make, and the oldest activation is freed last either way.
    for (int m = M - 1; m >= 0; --m) actions.push_back(Backward(m));
  }
  return order;
}

absl::StatusOr<ComputeOrder> OneFOneBOrder(int P, int V, int M) {
  RETURN_IF_ERROR(RequireOneChunk("1f1b", V));
  ComputeOrder order(P);
  for (int rank = 0; rank < P; ++rank) {
    std::vector<Action>& actions = order[rank];
    // Micro-batch 0's gradient reaches rank r 2(P-1-r) steps after rank r ran F0, time
    // enough for P-1-r more forwards; the first steady-state forward is the last of them.
    const int warmup = std::min(P - 1 - rank, M);
    for (int m = 0; m < warmup; ++m) actions.push_back(Forward(m));
    for (int i = 0; i + warmup < M; ++i) {
      actions.push_back(Forward(warmup + i));
      actions.push_back(Backward(i));
    }
    for (int m = M - warmup; m < M; ++m) actions.push_back(Backward(m));
  }
  return order;
}

}  // namespace pipeline
}  // namespace conveyor
