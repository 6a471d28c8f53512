// Zero-bubble schedules (Qi et al., "Zero Bubble Pipeline Parallelism", 2024,
// arXiv:2401.10241; docs/design.md §10). The backward is split: B (input gradient) is on
// the critical path, because the previous stage waits for it; W (weight gradient) waits
// for nobody, so it can move into what would otherwise be a bubble.
#include <algorithm>
#include <deque>
#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "parallel/pipeline/compute_order.h"

namespace conveyor {
namespace pipeline {
namespace {

absl::Status RequireChunks(const char* schedule, int V, int want) {
  if (V == want) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("pipeline schedule ", schedule, " runs ", want, " model chunk",
                   want == 1 ? "" : "s", " per rank, got V=", V,
                   " virtual stages per rank; set --num-virtual-stages-per-pipeline-rank ", want,
                   want == 1 ? " (interleaved-1f1b and zbv run several)" : ""));
}

}  // namespace

// ZB-H1. With B and W split but 1F1B's order, rank r idles 3(P-1) units with unit
// costs: waiting for its first input, for the first gradient after the warm-up, and in
// the drain. ZB-H1 keeps 1F1B's warm-up (P-1-r forwards) but rank r holds back its
// first r W's, one per steady step, and runs them in the drain, where it would
// otherwise wait for gradients. It then holds P-1-r warm-up activations, r deferred
// ones and the one in flight: P, the peak 1F1B has on its first rank. What stays idle
// is (P-1)(F+B-W) per rank, a third of 1F1B's (P-1)(F+B+W) when F = B = W.
absl::StatusOr<ComputeOrder> ZeroBubbleH1Order(int P, int V, int M) {
  RETURN_IF_ERROR(RequireChunks("zb-h1", V, 1));
  ComputeOrder order(P);
  for (int rank = 0; rank < P; ++rank) {
    std::vector<Action>& actions = order[rank];
    const int warmup = std::min(P - 1 - rank, M);
    int next_w = 0;
    for (int m = 0; m < warmup; ++m) actions.push_back(Forward(m));
    for (int i = 0; i + warmup < M; ++i) {
      actions.push_back(Forward(warmup + i));
      actions.push_back(BackwardInput(i));
      if (i >= rank) actions.push_back(BackwardWeight(next_w++));
    }
    for (int m = M - warmup; m < M; ++m) {
      actions.push_back(BackwardInput(m));
      actions.push_back(BackwardWeight(next_w++));
    }
    while (next_w < M) actions.push_back(BackwardWeight(next_w++));
  }
  return order;
}

// ZB-H2, built the way the paper's heuristic builds schedules: play the pipeline with
// unit F, B, W and let each free rank pick, in this order of priority, a B whose
// gradient has arrived (it unblocks the previous stage), an F whose input has arrived
// while it holds fewer than 2P-1 activations, a deferred W. So rank r runs forwards
// until its first B can come back, about 2(P-r)-1 of them, instead of waiting like 1F1B,
// and in the drain it runs the B's the moment they arrive and the W's in the gaps. Peak
// memory is 2P-1 activations instead of P. Within one iteration its bubble equals
// ZB-H1's, (P-1) units per rank: the last rank cannot start before P-1 and the first
// cannot finish before the last gradient arrives. The paper's "zero" needs the next
// iteration to start in this one's tail (optimizer post-validation), which one
// iteration on its own does not show.
absl::StatusOr<ComputeOrder> ZeroBubbleH2Order(int P, int V, int M) {
  RETURN_IF_ERROR(RequireChunks("zb-h2", V, 1));
  const int limit = 2 * P - 1;
  constexpr int kNever = std::numeric_limits<int>::max();
  // End time of F and B of (rank, micro-batch); kNever until run.
  std::vector<std::vector<int>> f_end(P, std::vector<int>(M, kNever));
  std::vector<std::vector<int>> b_end(P, std::vector<int>(M, kNever));
  std::vector<int> next_f(P, 0), next_b(P, 0), stashed(P, 0);
  std::vector<std::deque<int>> pending_w(P);
  ComputeOrder order(P);
  size_t remaining = static_cast<size_t>(3) * P * M;
  for (int t = 0; remaining > 0; ++t) {
    for (int r = 0; r < P; ++r) {
      const int b = next_b[r], f = next_f[r];
      const bool b_ready = b < M && f_end[r][b] <= t && (r == P - 1 || b_end[r + 1][b] <= t);
      const bool f_ready = f < M && stashed[r] < limit && (r == 0 || f_end[r - 1][f] <= t);
      if (b_ready) {
        order[r].push_back(BackwardInput(b));
        b_end[r][b] = t + 1;
        pending_w[r].push_back(b);
        ++next_b[r];
      } else if (f_ready) {
        order[r].push_back(Forward(f));
        f_end[r][f] = t + 1;
        ++stashed[r];
        ++next_f[r];
      } else if (!pending_w[r].empty()) {
        order[r].push_back(BackwardWeight(pending_w[r].front()));
        pending_w[r].pop_front();
        --stashed[r];
      } else {
        continue;
      }
      --remaining;
    }
  }
  return order;
}

// ZB-V (Qi et al. 2024b, "Pipeline Parallelism with Controllable Memory"; PyTorch's
// ScheduleZBVZeroBubble): chunk 0 of rank r is stage r, chunk 1 is stage 2P-1-r, so rank
// P-1 passes activations from chunk 0 to chunk 1 locally and rank 0 both starts the
// forward and ends the backward. The order is built for max(M, 2P-1) micro-batches, the
// fewest that fill the V, and the phantom ones are dropped.
absl::StatusOr<ComputeOrder> ZeroBubbleVOrder(int P, int V, int M) {
  RETURN_IF_ERROR(RequireChunks("zbv", V, 2));
  const int n = std::max(M, 2 * P - 1);
  ComputeOrder order(P);
  for (int rank = 0; rank < P; ++rank) {
    std::vector<Action> padded;
    int f0 = 0, f1 = 0, b0 = 0, b1 = 0;
    // Fill the down leg: rank r runs 2(P-r)-1 chunk-0 forwards before the first chunk-1
    // forward can come back up to it.
    for (int i = 0; i < 2 * (P - rank) - 1; ++i) padded.push_back(Forward(f0++, 0));
    for (int i = 0; i < rank; ++i) {
      padded.push_back(Forward(f1++, 1));
      padded.push_back(Forward(f0++, 0));
    }
    // The up leg's first gradients start at the top of the V (rank 0's chunk 1).
    for (int i = 0; i < P - rank; ++i) {
      padded.push_back(Forward(f1++, 1));
      padded.push_back(BackwardInput(b1, 1));
      padded.push_back(BackwardWeight(b1++, 1));
    }
    while (f1 < f0 || f0 < n) {
      if (f0 < n) padded.push_back(Forward(f0++, 0));
      padded.push_back(BackwardInput(b0, 0));
      padded.push_back(BackwardWeight(b0++, 0));
      padded.push_back(Forward(f1++, 1));
      padded.push_back(BackwardInput(b1, 1));
      padded.push_back(BackwardWeight(b1++, 1));
    }
    // Drain: B's first (others wait for them), W's fill the gaps and the end.
    int w0 = b0, w1 = b1;
    for (int i = 0; i < rank; ++i) {
      padded.push_back(BackwardInput(b0++, 0));
      padded.push_back(BackwardInput(b1++, 1));
    }
    for (int i = 0; i < P - rank; ++i) {
      padded.push_back(BackwardInput(b0++, 0));
      padded.push_back(BackwardWeight(w0++, 0));
    }
    while (w1 < b1) padded.push_back(BackwardWeight(w1++, 1));
    while (w0 < b0) padded.push_back(BackwardWeight(w0++, 0));
    for (const Action& action : padded) {
      if (action.micro_batch < M) order[rank].push_back(action);
    }
  }
  return order;
}

}  // namespace pipeline
}  // namespace conveyor
