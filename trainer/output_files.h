// The files a run writes besides checkpoints (--metrics-file, --trace-file), checked
// before it starts: a path in a missing folder would otherwise fail only when the file
// is first written, the trace's only after the whole run.
#ifndef CONVEYOR_TRAINER_OUTPUT_FILES_H_
#define CONVEYOR_TRAINER_OUTPUT_FILES_H_

#include "absl/status/status.h"
#include "proto/config.pb.h"

namespace conveyor {

// InvalidArgument naming the flag, the path and the fix when a set output file's
// folder is missing or not writable, or the path is a folder. Creates nothing.
absl::Status CheckOutputFiles(const Config& config);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_OUTPUT_FILES_H_
