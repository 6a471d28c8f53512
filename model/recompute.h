// Activation recomputation (Korthikanti et al. 2022, as Megatron offers it): what a
// layer's forward may drop from its stash and rebuild in the backward of the same
// micro-batch. Recomputed forwards use the same counter-based RNG keys, so results do
// not change, bit for bit.
//
//  - full: a checkpointed layer keeps only its input; backward reruns its forward.
//      uniform: layers form groups of N (per model chunk); only each group's input is
//               kept, and backward reruns the group.
//      block:   the first N layers of each chunk are checkpointed one by one.
//  - selective: parts of every layer are dropped and recomputed:
//      core_attn: the softmax probabilities (the s^2-per-head term),
//      mlp:       fc1's output and the activation,
//      layernorm: the norms' outputs.
#ifndef CONVEYOR_MODEL_RECOMPUTE_H_
#define CONVEYOR_MODEL_RECOMPUTE_H_

#include <cstdint>

namespace conveyor {

struct SelectiveRecompute {
  bool core_attn = false;
  bool mlp = false;
  bool layernorm = false;
};

struct RecomputePolicy {
  enum class Full { kNone, kUniform, kBlock };
  Full full = Full::kNone;
  int64_t num_layers = 0;  // N of uniform groups or block
  SelectiveRecompute selective;

  // Whether local layer `index` of a chunk keeps its input as a group checkpoint
  // (uniform: the first layer of each group; block: each of the first N layers).
  bool KeepsCheckpoint(int64_t index) const;
  // Whether local layer `index`'s full stash is dropped after forward.
  bool Recomputes(int64_t index) const;
  // The first layer of the recompute group holding `index`.
  int64_t GroupStart(int64_t index) const;
};

}  // namespace conveyor

#endif  // CONVEYOR_MODEL_RECOMPUTE_H_
