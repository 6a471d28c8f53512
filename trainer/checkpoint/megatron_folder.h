// Checkpoints written by Megatron-LM, recognised so that --load names what it found and
// the route that exists, instead of a missing manifest. Megatron writes
// <dir>/latest_checkpointed_iteration.txt beside iter_NNNNNNN/ (or release/) folders,
// as Conveyor does, but fills them in one of two layouts
// (megatron/training/checkpointing.py):
//   torch:      iter_NNNNNNN/mp_rank_TT[_PPP]/model_optim_rng.pt, one per model-parallel rank;
//   torch_dist: iter_NNNNNNN/__R_I.distcp files with a .metadata index (PyTorch
//               Distributed Checkpoint), plus common.pt and metadata.json.
#ifndef CONVEYOR_TRAINER_CHECKPOINT_MEGATRON_FOLDER_H_
#define CONVEYOR_TRAINER_CHECKPOINT_MEGATRON_FOLDER_H_

#include <optional>
#include <string>
#include <vector>

namespace conveyor {

// When the newest checkpoint folder among `names` (the entries of `dir`: the highest
// iter_NNNNNNN, else release) was written by Megatron-LM, what it holds, e.g.
// "Megatron-LM's torch_dist layout: iter_0000100 holds __0_0.distcp and .metadata";
// nullopt otherwise (a Conveyor checkpoint has a manifest.pb).
std::optional<std::string> DescribeMegatronCheckpoint(const std::string& dir,
                                                      const std::vector<std::string>& names);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_CHECKPOINT_MEGATRON_FOLDER_H_
