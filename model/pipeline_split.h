// How many transformer layers each global pipeline stage holds (P * V stages), by
// Megatron's rules:
//  - even: num_layers / (P * V) each;
//  - --decoder-first/last-pipeline-num-layers (V = 1): the first and last stage take
//    those, the others split the rest evenly;
//  - --account-for-embedding/loss-in-pipeline-split: the embedding (loss) counts as a
//    layer of the first (last) stage, which then holds one transformer layer fewer.
// Every configuration that cannot be split exactly is refused with the arithmetic
// spelled out: no layer is ever silently dropped.
#ifndef CONVEYOR_MODEL_PIPELINE_SPLIT_H_
#define CONVEYOR_MODEL_PIPELINE_SPLIT_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace conveyor {

// The split's inputs, as the flags give them (trainer/config/model_from_config.h).
struct PipelineSplit {
  int64_t num_layers = 0;
  int pipeline_ranks = 1;  // P
  int virtual_stages = 1;  // V, chunks per pipeline rank
  // --decoder-first/last-pipeline-num-layers; 0: split evenly.
  int64_t first_stage_layers = 0;
  int64_t last_stage_layers = 0;
  // --account-for-embedding/loss-in-pipeline-split.
  bool embedding_counts = false;
  bool loss_counts = false;

  // Whether the first or last stage's layers are given: the uneven split.
  bool uneven() const { return first_stage_layers > 0 || last_stage_layers > 0; }
  // What the even split divides over the stages: the transformer layers, plus the
  // embedding and the loss where they count as layers.
  int64_t slots() const { return num_layers + (embedding_counts ? 1 : 0) + (loss_counts ? 1 : 0); }
};

// P x V layer counts, one per global stage. P and V must be positive and the layer
// counts non-negative. Errors name the flags, for the user: config validation reports
// them as they are.
absl::StatusOr<std::vector<int64_t>> LayersPerStage(const PipelineSplit& split);

}  // namespace conveyor

#endif  // CONVEYOR_MODEL_PIPELINE_SPLIT_H_
