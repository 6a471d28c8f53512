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
#include "proto/config.pb.h"

namespace conveyor {

// The pipeline size and num_virtual_stages_per_pipeline_rank (0 counts as 1) must be
// positive and the layer counts non-negative. Errors name the flags, for the user: config
// validation reports them as they are.
absl::StatusOr<std::vector<int64_t>> LayersPerStage(const Config& config);

// Whether --decoder-first/last-pipeline-num-layers ask for the uneven split.
bool IsUnevenSplit(const ParallelConfig& parallel);

// What the even split divides over the stages: the transformer layers, plus the
// embedding and the loss where --account-for-embedding/loss-in-pipeline-split count
// them as layers.
int64_t SplitSlots(const Config& config);

}  // namespace conveyor

#endif  // CONVEYOR_MODEL_PIPELINE_SPLIT_H_
