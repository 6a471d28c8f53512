// Megatron's interleaved 1F1B (Narayanan et al. 2021; megatron/core/pipeline_parallel/
// schedules.py, forward_backward_pipelining_with_interleaving).
//
// Each rank holds V chunks; chunk c of rank r is stage c*P + r. A rank walks a table of
// (micro-batch, chunk) pairs: micro-batches in groups of P, each group through chunk 0,
// then chunk 1, ..., so that when rank 0 finishes chunk 0 of a group, micro-batch g of
// that group has just left stage P-1 and chunk 1 can start on it without waiting.
//
// Warm-up length, with unit F and B and nothing waiting: rank r starts its first forward
// at time r; micro-batch 0 leaves the last stage, V*P-1, at time V*P, and its gradient
// needs P-1-r backward steps to reach rank r's last chunk (stage (V-1)P + r), so rank r's
// first backward starts at V*P + P-1-r. The window between holds V*P + P-1 - 2r =
// (V-1)P + 2(P-1-r) + 1 forwards: Megatron's warm-up, (P-1-r)*2 + (V-1)*P, plus the
// steady state's first forward.
#include <algorithm>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "parallel/pipeline/compute_order.h"

namespace conveyor {
namespace pipeline {

absl::StatusOr<ComputeOrder> Interleaved1F1BOrder(int P, int V, int M) {
  if (V < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pipeline schedule interleaved-1f1b needs at least 2 virtual stages per rank, got "
        "V=",
        V, "; with one chunk per rank use --pipeline-schedule=1f1b"));
  }
  // Micro-batches go through the chunks in groups of P. Newer Megatron lets the last
  // group be shorter; then a rank can be ordered to run a forward that waits, around the
  // ring, on a backward it runs later (P=8, V=2, M=10: rank 0 runs all 20 forwards
  // before any backward, but its F9c1 needs rank 7's F9, which rank 7 runs after BW0,
  // which needs rank 0's BW0c1). The simulator finds such cycles for many M not divisible
  // by P, so we keep Megatron's original rule.
  if (M % P != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("pipeline schedule interleaved-1f1b needs the number of micro-batches to be a "
                     "multiple of the pipeline ranks (M % P == 0), got M=",
                     M, ", P=", P, "; use --num-micro-batches ", (M / P + 1) * P,
                     (M >= P ? absl::StrCat(" or ", M / P * P) : std::string()),
                     " (or a global batch size that gives one)"));
  }
  // (micro-batch, chunk) in forward order; the last group may be shorter than P.
  std::vector<std::pair<int, int>> table;
  for (int first = 0; first < M; first += P) {
    const int last = std::min(first + P, M);
    for (int c = 0; c < V; ++c) {
      for (int m = first; m < last; ++m) table.push_back({m, c});
    }
  }
  const int total = V * M;
  ComputeOrder order(P);
  for (int rank = 0; rank < P; ++rank) {
    std::vector<Action>& actions = order[rank];
    const int warmup = std::min((P - 1 - rank) * 2 + (V - 1) * P, total);
    auto forward = [&](int k) { return Forward(table[k].first, table[k].second); };
    // Backwards walk the same table with the chunks reversed: the last chunk first.
    auto backward = [&](int k) { return Backward(table[k].first, V - 1 - table[k].second); };
    for (int k = 0; k < warmup; ++k) actions.push_back(forward(k));
    for (int k = 0; k + warmup < total; ++k) {
      actions.push_back(forward(k + warmup));
      actions.push_back(backward(k));
    }
    for (int k = total - warmup; k < total; ++k) actions.push_back(backward(k));
  }
  return order;
}

}  // namespace pipeline
}  // namespace conveyor
