// The action list of a forward-only pass (evaluation): micro-batch by micro-batch,
// stage by stage, each rank receives, computes and sends on its own stages. Every
// message's receiver posts its receive in the same (micro-batch, stage) order as the
// sender its send, so batched blocking transfers cannot deadlock, for either stage
// layout.
#ifndef CONVEYOR_PARALLEL_PIPELINE_FORWARD_ONLY_H_
#define CONVEYOR_PARALLEL_PIPELINE_FORWARD_ONLY_H_

#include <vector>

#include "parallel/pipeline/action.h"
#include "parallel/pipeline/pipeline_place.h"

namespace conveyor {
namespace pipeline {

// `place`'s actions for M micro-batches.
std::vector<Action> ForwardOnlyActions(const PipelinePlace& place, int M);

}  // namespace pipeline
}  // namespace conveyor

#endif  // CONVEYOR_PARALLEL_PIPELINE_FORWARD_ONLY_H_
