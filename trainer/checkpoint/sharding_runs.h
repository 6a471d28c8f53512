// Runs for the model's own description of a shard (model/parameter.h's Sharding), so
// the trainer can hand parameters and their optimizer state to the checkpoint library
// without materialising GlobalIndices (8 bytes per element).
#ifndef CONVEYOR_TRAINER_CHECKPOINT_SHARDING_RUNS_H_
#define CONVEYOR_TRAINER_CHECKPOINT_SHARDING_RUNS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "model/parameter.h"
#include "trainer/checkpoint/checkpoint_types.h"
#include "trainer/checkpoint/index_runs.h"

namespace conveyor {

// The runs of the local tensor that `sharding` cuts from a tensor of `global_shape`,
// in local order: the same indices as GlobalIndices, as about one run per range.
std::vector<IndexRun> RunsForSharding(const std::vector<int64_t>& global_shape,
                                      const Sharding& sharding);

// A parameter's value, or a tensor laid out like it (e.g. its replicated optimizer
// state) under another name: `data` has p.local_numel() elements.
TensorShardRef ShardRefFor(const Parameter& p, const std::string& name, float* data);
inline TensorShardRef ShardRefFor(Parameter& p) { return ShardRefFor(p, p.name, p.value.data()); }

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_CHECKPOINT_SHARDING_RUNS_H_
