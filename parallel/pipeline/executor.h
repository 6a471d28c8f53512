// Runs one rank's action list (a schedule) on a Stage, moving activations and
// gradients between ranks with batched point-to-point transfers: consecutive transfer
// actions are posted together and waited on together, which is what makes the
// schedules' lists deadlock-free. Adding a schedule never changes this file.
//
// Hand-overs between two chunks on the same rank (the V-shape's turn, or P = 1 with
// several chunks) need no transfer: the executor passes the tensor on directly.
#ifndef CONVEYOR_PARALLEL_PIPELINE_EXECUTOR_H_
#define CONVEYOR_PARALLEL_PIPELINE_EXECUTOR_H_

#include <vector>

#include "absl/status/status.h"
#include "parallel/communicator.h"
#include "parallel/pipeline/action.h"
#include "parallel/pipeline/pipeline_place.h"
#include "parallel/pipeline/stage.h"
#include "parallel/pipeline/timeline.h"

namespace conveyor {
namespace pipeline {

// `pp` is the pipeline group (a group of one when P = 1). When `timeline` is not null,
// each action's [start, end) in seconds since the call began is appended to
// `*timeline` (transfers: from posting the batch to its completion).
absl::Status RunActions(const std::vector<Action>& actions, const PipelinePlace& place,
                        Communicator& pp, Stage& stage, std::vector<TimedAction>* timeline);

}  // namespace pipeline
}  // namespace conveyor

#endif  // CONVEYOR_PARALLEL_PIPELINE_EXECUTOR_H_
