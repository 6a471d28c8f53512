// Where one rank sits in the pipeline: the stage layout, P, V and its pipeline rank.
// The executor routes transfers by it and the model builds its chunks from it; both
// include this header rather than each other's.
#ifndef CONVEYOR_PARALLEL_PIPELINE_PIPELINE_PLACE_H_
#define CONVEYOR_PARALLEL_PIPELINE_PIPELINE_PLACE_H_

#include "parallel/pipeline/action.h"

namespace conveyor {
namespace pipeline {

struct PipelinePlace {
  StageLayout layout = StageLayout::kLoop;
  int num_ranks = 1;   // P
  int num_chunks = 1;  // V
  int rank = 0;        // this rank's pipeline rank

  int num_stages() const { return num_ranks * num_chunks; }
  // The global stage of this rank's `chunk`.
  int GlobalStage(int chunk) const { return pipeline::GlobalStage(layout, num_ranks, rank, chunk); }
};

}  // namespace pipeline
}  // namespace conveyor

#endif  // CONVEYOR_PARALLEL_PIPELINE_PIPELINE_PLACE_H_
