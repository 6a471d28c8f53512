// What --dry-run says of --load: the folder read as a run reads it before training
// (SurveyCheckpointFolder, then OpenCheckpoint of the iteration --ckpt-step or the
// latest file names), so that a plan stops where the run would, without reading the
// tensors' data.
#ifndef CONVEYOR_TRAINER_CHECKPOINT_LOAD_PREVIEW_H_
#define CONVEYOR_TRAINER_CHECKPOINT_LOAD_PREVIEW_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace conveyor {

// The plan's line for `load_dir` (non-empty), without a trailing newline, e.g.
// "plan: --load /ckpt: iteration 100 (its manifest and data files open; the tensors are
// read when the run starts)"; `ckpt_step` 0 means the latest. The errors are the run's,
// prefixed "--load DIR: ": a file, an unreadable folder, a checkpoint written by
// Megatron-LM (named with the route to --load-hf), a latest file naming nothing, a
// missing or damaged manifest.
absl::StatusOr<std::string> PreviewLoad(const std::string& load_dir, int64_t ckpt_step);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_CHECKPOINT_LOAD_PREVIEW_H_
