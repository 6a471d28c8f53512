// Megatron's settings taken from the checkpoint --load reads instead of the command line:
//   --use-checkpoint-args: the model's (megatron/training/checkpointing.py
//     load_args_from_checkpoint), with --use-mp-args-from-checkpoint-args the parallel
//     sizes, and unless --no-use-tokenizer-model-from-checkpoint-args the tokenizer;
//   --use-checkpoint-opt_param-scheduler: the learning-rate and weight-decay schedule
//     (megatron/core/optimizer_param_scheduler.py load_state_dict).
// When --load holds no checkpoint the command line's settings stay, as in Megatron.
#ifndef CONVEYOR_TRAINER_CONFIG_CHECKPOINT_ARGS_H_
#define CONVEYOR_TRAINER_CONFIG_CHECKPOINT_ARGS_H_

#include <ostream>

#include "absl/status/status.h"
#include "proto/config.pb.h"

namespace conveyor {

// Applies the settings of `saved` (the Config a checkpoint holds) that `config`'s
// --use-checkpoint-* flags ask for, and says on `log` which values changed.
void ApplySavedSettings(const Config& saved, Config* config, std::ostream& log);

// Reads the checkpoint --load would load (--ckpt-step or the latest) and applies
// ApplySavedSettings; nothing when no --use-checkpoint-* flag is given. Errors are
// the load's, named "--load DIR: ".
absl::Status ApplyCheckpointArgs(Config* config, std::ostream& log);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_CONFIG_CHECKPOINT_ARGS_H_
