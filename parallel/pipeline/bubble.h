// Closed forms for what a schedule costs, to print beside the simulation and the
// measurement (docs/design.md §6). Bubble = idle / wall-clock per rank, with one
// forward or one backward of a chunk as the time unit (docs/design.md §10).
//
//   gpipe, 1f1b        (P-1) / (M+P-1)           Huang et al. 2019; 1F1B changes memory,
//                                                not the bubble (Narayanan et al. 2021, §2.2.1)
//   interleaved-1f1b   (P-1) / (V*M+P-1)         Narayanan et al. 2021, §2.2.2
//   zb-h1, zb-h2       (P-1)(F+B-W) / (M(F+B+W) + (P-1)(F+B-W)), with F = B = W:
//                      (P-1) / (3M+P-1)          Qi et al. 2024 (arXiv:2401.10241); a
//                                                third of 1F1B's idle time (P-1)(F+B+W)
//   zbv                (P-1) / (6M+P-1) with F = B = W per chunk, for M >= 2P-1: the
//                      last rank's start is the only gap
//
// ZB-H2's "zero" bubble needs consecutive iterations to overlap (the paper's optimizer
// post-validation); within one iteration, which is what Conveyor simulates and measures,
// it equals ZB-H1's.
#ifndef CONVEYOR_PARALLEL_PIPELINE_BUBBLE_H_
#define CONVEYOR_PARALLEL_PIPELINE_BUBBLE_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace conveyor {
namespace pipeline {

// (P-1) / (M+P-1).
double PipelineBubble(int P, int M);
// (P-1) / (V*M+P-1).
double InterleavedBubble(int P, int V, int M);
// ZB-H1 with costs f, b, w for F, B (input gradient) and W.
double ZeroBubbleH1Bubble(int P, int M, double f, double b, double w);

// The formula for `schedule` with unit costs per chunk (F = B = W = 1; a fused backward
// is B+W, which leaves the ratios of gpipe and 1f1b unchanged).
absl::StatusOr<double> PredictedBubble(absl::string_view schedule, int P, int V, int M);

// Most (micro-batch, chunk) activations `rank` holds at once (from F to W, or to the
// fused B): gpipe M; 1f1b min(P-rank, M), so P on the first stage (Narayanan et al. 2021,
// §2.2.1: at most P micro-batches in flight instead of M); interleaved-1f1b its warm-up plus
// one, min(2(P-1-rank) + (V-1)P + 1, V*M); zb-h1 min(P, M), 1F1B's first-stage peak on
// every rank; zb-h2 min(2P-1, M). zbv: an upper bound, min(2P, 2M) half-size chunks,
// the memory of P full-size ones.
absl::StatusOr<int> PeakStashed(absl::string_view schedule, int P, int V, int M, int rank);

}  // namespace pipeline
}  // namespace conveyor

#endif  // CONVEYOR_PARALLEL_PIPELINE_BUBBLE_H_
