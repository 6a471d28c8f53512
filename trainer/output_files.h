// The files a run writes besides checkpoints (--metrics-file, --trace-file,
// --profile-file, --tensorboard-dir), checked before it starts: a path in a missing or
// read-only folder would otherwise fail only when the file is first written, the
// trace's and the profile's only after the whole run.
#ifndef CONVEYOR_TRAINER_OUTPUT_FILES_H_
#define CONVEYOR_TRAINER_OUTPUT_FILES_H_

#include <string>

#include "absl/status/status.h"
#include "proto/config.pb.h"

namespace conveyor {

// InvalidArgument naming the flag, the path, the errno text and the fix when a set
// output file's folder is missing or not writable, the file exists read-only, or the
// path is a folder; when --tensorboard-dir cannot be created; and when --profile's
// window starts at or after --train-iters (an empty trace). `config` is resolved
// (--train-iters derived from --train-samples). Creates nothing.
absl::Status CheckOutputFiles(const Config& config);

// A line for stderr when --profile's window ends after --train-iters (the trace holds
// the iterations up to the last), else empty.
std::string ProfileWindowWarning(const Config& config);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_OUTPUT_FILES_H_
