// Adds the sends and receives to a compute order.
//
// Each rank runs batches of transfers between computes and waits for the whole batch
// (batch_isend_irecv + wait), and a send is only done once its receive is posted. So
// where a transfer sits decides both whether the lists can deadlock and how long ranks
// wait. Placement works from the ideal timeline (unit F, B, W, fused B = 2, data
// dependencies only, no transfers): a rank can post a batch between two computes at any
// time from the end of the first to the start of the second without delaying anything.
// A transfer goes where the sender, after producing the tensor, and the receiver, before
// the compute that consumes it, both have such a window open at the same time, the
// earliest such time. When there is none (say the receiver is in the middle of a fused
// backward when the tensor is ready and needs it right after), the receiver posts right
// after that compute and the sender in its last window before then; the sender then waits
// a little, as it would in Megatron's lock-step batches.
//
// Receives are thus posted as soon as the data could be there, never after the sender
// would block on them in the ideal timeline: the simulator finds no deadlock for any
// schedule and shape we generate (tests/parallel/pipeline). Both sides order a batch by
// the same key (meeting time, then send time), so the k-th send from one rank to
// another meets the k-th receive there, whatever the direction, as NCCL requires.
// Transfers between two chunks of the same rank (zbv's turn at rank P-1, or P = 1) stay
// local and get no action.
#ifndef CONVEYOR_PARALLEL_PIPELINE_P2P_PLACEMENT_H_
#define CONVEYOR_PARALLEL_PIPELINE_P2P_PLACEMENT_H_

#include <vector>

#include "absl/status/statusor.h"
#include "parallel/pipeline/action.h"
#include "parallel/pipeline/compute_order.h"

namespace conveyor {
namespace pipeline {

// `order` has one list per rank (P = order.size()) covering stages 0..V*P-1. Fails when
// the order cannot run at all (a compute waits on one that comes after it).
absl::StatusOr<std::vector<std::vector<Action>>> AddP2p(StageLayout layout, int V,
                                                        const ComputeOrder& order);

}  // namespace pipeline
}  // namespace conveyor

#endif  // CONVEYOR_PARALLEL_PIPELINE_P2P_PLACEMENT_H_
