// The bytes one training step moves per rank, by kind of parallelism: what --dry-run
// predicts beside the measured message bytes (docs/design.md §10, traffic per step).
#ifndef CONVEYOR_TRAINER_PLANNING_STEP_TRAFFIC_H_
#define CONVEYOR_TRAINER_PLANNING_STEP_TRAFFIC_H_

#include <vector>

#include "model/memory_model.h"
#include "trainer/config/resolved_config.h"

namespace conveyor {

struct StepTraffic {
  double pipeline = 0;          // activations forward, their gradients back
  double data_parallel = 0;     // gradient reduction (and parameter all-gather), global_aux_loss
  double tensor_parallel = 0;   // the layers' regions, embedding, head, cross-entropy
  double context_parallel = 0;  // ring attention's blocks, the router's logits
};

// One step's traffic, for the resolved config's model, on a pipeline rank (TP rank 0,
// DP rank 0) whose predicted memory is `rank`, in the dtypes messages travel in
// (activations bf16 under --bf16).
StepTraffic PredictStepTraffic(const ResolvedConfig& resolved, const RankMemory& rank);

// Per kind, the most that any pipeline rank of `memory` (PredictMemory's, one per rank)
// moves: what the run's log reports as its messages per iteration, the max across ranks
// (the last stage's output layer and multi-token prediction depths can outweigh the first
// stage's embedding).
StepTraffic PredictBusiestStepTraffic(const ResolvedConfig& resolved,
                                      const std::vector<RankMemory>& memory);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_PLANNING_STEP_TRAFFIC_H_
