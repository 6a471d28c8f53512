// Runs every rank's action list against a clock, the way the executor would run it, to
// find what a schedule costs before any process starts: makespan, bubble per rank, peak
// stashed activations, transfers, and whether it can deadlock.
//
// Execution model (the executor's):
//  - A rank runs its list in order, one action at a time.
//  - A compute action takes its cost and needs its inputs to be here already: F a
//    received activation (or the local previous stage's F, or nothing on stage 0), B the
//    chunk's own F and a received output gradient (or the local next stage's B, or
//    nothing on the last stage), W the chunk's own B. A compute whose input is not here
//    is an error in the list, not a wait: nothing later in the list could bring it.
//  - Consecutive transfers form one batch, posted together when the rank reaches it; the
//    rank moves on when all of them are done (Megatron's batch_isend_irecv + wait). A
//    send is done when its receive is posted and vice versa (rendezvous, as NCCL does for
//    any tensor of size), plus the p2p cost. The k-th send from rank a to rank b meets the
//    k-th receive on b from a, whatever the direction (NCCL's matching); they must be of
//    the same kind and name the same micro-batch and adjacent stages.
//  - If no rank can move and some have not finished, that is a deadlock.
#ifndef CONVEYOR_PARALLEL_PIPELINE_SIMULATOR_H_
#define CONVEYOR_PARALLEL_PIPELINE_SIMULATOR_H_

#include <vector>

#include "absl/status/statusor.h"
#include "parallel/pipeline/action.h"
#include "parallel/pipeline/schedule.h"
#include "parallel/pipeline/timeline.h"

namespace conveyor {
namespace pipeline {

// Time per action, per model chunk. As in docs/design.md §10, one forward or one backward
// is one time slice; with the backward split, B and W each take one.
struct Costs {
  double forward = 1;
  double backward_input = 1;
  double backward_weight = 1;  // a fused backward costs backward_input + backward_weight
  double p2p = 0;              // per transfer, once both sides are posted
  // True: a send is done only when its receive is posted (rendezvous; NCCL on one
  // stream, and the safe assumption for deadlocks). False: a send is done once posted,
  // as if the p2p stream ran beside compute with room to buffer; receives still wait.
  bool blocking_sends = true;

  double Of(ActionType type) const;
};

struct RankReport {
  double busy = 0;
  double idle = 0;
  double bubble_fraction = 0;  // idle / makespan
  // Most (micro-batch, chunk) activations held at once: one is held from its F until its
  // W (or fused B) is done.
  int peak_stashed = 0;
  int messages_sent = 0;
};

struct SimulationResult {
  Timeline timeline;  // computes and transfers
  double makespan = 0;
  std::vector<RankReport> ranks;
  double bubble_fraction = 0;  // over all ranks: sum of idle / (P * makespan)
  int p2p_messages = 0;        // matched send/receive pairs
};

// Errors: Aborted for a deadlock (naming each stuck rank and the transfers it waits on);
// FailedPrecondition for a list that is wrong in itself (a compute before its input, a
// transfer with the wrong peer or meeting the wrong partner, work missing or repeated).
absl::StatusOr<SimulationResult> Simulate(const Plan& plan, const Costs& costs = Costs());

}  // namespace pipeline
}  // namespace conveyor

#endif  // CONVEYOR_PARALLEL_PIPELINE_SIMULATOR_H_
