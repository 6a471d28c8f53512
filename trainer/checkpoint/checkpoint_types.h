// What a rank hands to the checkpoint library: its local tensors, described by their
// global name, global shape and the global elements they hold, and the run's state.
#ifndef CONVEYOR_TRAINER_CHECKPOINT_CHECKPOINT_TYPES_H_
#define CONVEYOR_TRAINER_CHECKPOINT_CHECKPOINT_TYPES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "proto/checkpoint.pb.h"
#include "proto/config.pb.h"
#include "trainer/checkpoint/index_runs.h"

namespace conveyor {

// One local fp32 buffer to save from or load into. Element k of `data` is the global
// element at the k-th position of `runs` (local order), so CountElements(runs) == n.
//
// Names: parameters use their Parameter::name ("layers.0.mlp.fc1.weight"); optimizer
// state uses "optimizer.exp_avg/<parameter name>" and "optimizer.exp_avg_sq/<...>"
// in the parameter's global index space, whichever optimizer (replicated or
// distributed) produced it, so either can load the other's state.
struct TensorShardRef {
  std::string name;
  std::vector<int64_t> global_shape;
  std::vector<IndexRun> runs;
  float* data = nullptr;  // only read when saving
  int64_t n = 0;
};

// A generator state as its owner serialises it (e.g. a dropout stream's counters).
struct NamedRngState {
  std::string name;
  std::string state;
};

// Everything besides tensors that a resumed run needs.
struct CheckpointState {
  Config config;  // the effective config; rank 0's copy is stored
  int64_t iteration = 0;
  int64_t consumed_samples = 0;  // training samples consumed so far
  DataPosition data_position;    // per split, for the data loaders
  SavedLayout layout;            // the saving job's layout, for messages and tools
  int64_t optimizer_steps = 0;   // Adam's bias-correction step count
  // This rank's generator states; stored per rank, returned per rank on load.
  std::vector<NamedRngState> rng_states;
};

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_CHECKPOINT_CHECKPOINT_TYPES_H_
