// The compute half of each schedule: for every rank, the order of its F, B, W (or fused
// B) actions, without transfers. p2p_placement.h adds the sends and receives, so a new
// schedule only has to say in which order a rank computes.
//
// Each function checks that (P, V, M) suits the schedule and says why not; P, V, M >= 1
// are checked by the caller.
#ifndef CONVEYOR_PARALLEL_PIPELINE_COMPUTE_ORDER_H_
#define CONVEYOR_PARALLEL_PIPELINE_COMPUTE_ORDER_H_

#include <vector>

#include "absl/status/statusor.h"
#include "parallel/pipeline/action.h"

namespace conveyor {
namespace pipeline {

// Per rank, compute actions only.
using ComputeOrder = std::vector<std::vector<Action>>;

// All forwards, then all backwards in reverse micro-batch order (GPipe, Huang et al.,
// 2019: the last micro-batch forward is the first one back).
absl::StatusOr<ComputeOrder> GpipeOrder(int P, int V, int M);
// Megatron's non-interleaved 1F1B: P-1-rank warm-up forwards, then one forward and one
// backward alternately, then the remaining backwards.
absl::StatusOr<ComputeOrder> OneFOneBOrder(int P, int V, int M);
// Megatron's interleaved 1F1B over V chunks per rank (stage of chunk c on rank r is
// c*P + r), micro-batches taken in groups of P; M must be a multiple of P.
absl::StatusOr<ComputeOrder> Interleaved1F1BOrder(int P, int V, int M);
// Zero-bubble ZB-H1 (Qi et al. 2024, arXiv:2401.10241): 1F1B with B and W split, rank r
// deferring r of its W's into the cool-down, at 1F1B's peak memory of P micro-batches.
absl::StatusOr<ComputeOrder> ZeroBubbleH1Order(int P, int V, int M);
// ZB-H2: 2(P-r)-1 warm-up forwards so no rank waits for its first B; peak 2P-1.
absl::StatusOr<ComputeOrder> ZeroBubbleH2Order(int P, int V, int M);
// ZB-V: two chunks per rank in a V (stages r and 2P-1-r), B and W split.
absl::StatusOr<ComputeOrder> ZeroBubbleVOrder(int P, int V, int M);

}  // namespace pipeline
}  // namespace conveyor

#endif  // CONVEYOR_PARALLEL_PIPELINE_COMPUTE_ORDER_H_
