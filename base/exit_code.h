// The process exit code of a failure, one rule for every binary of the project (the
// trainer, its export command, preprocess, inspect_data):
//   0  success;
//   2  the input was refused: something the user gave must change (a flag value, a
//      config or data file, a damaged checkpoint or dataset, a checkpoint folder, the
//      launcher's environment), before or during the run;
//   1  a failure while running that a change of input would not fix: an I/O error, a
//      full disk, a peer that died, a timeout, memory the machine lacks.
// The status code decides, so that a refusal exits 2 wherever it is found:
// InvalidArgument, FailedPrecondition, NotFound, OutOfRange, AlreadyExists,
// PermissionDenied and DataLoss (a file read that is damaged) are refusals of input;
// every other code is a failure. Code that reports a broken invariant of its own uses
// Internal, never InvalidArgument; a failed write uses ResourceExhausted (no room) or
// Unavailable, never DataLoss.
#ifndef CONVEYOR_BASE_EXIT_CODE_H_
#define CONVEYOR_BASE_EXIT_CODE_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace conveyor {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// Whether `status` refuses the user's input (the codes above).
bool IsInputRefusal(const absl::Status& status);

// kExitOk for OK, kExitUsage for a refusal of input, else kExitFailure.
int ExitCodeFor(const absl::Status& status);

// The code of a failed write, fsync or close of a file that is open (its path was
// fine), from its errno: ResourceExhausted when there is no room (ENOSPC, EDQUOT, EFBIG
// past `ulimit -f`), else Unavailable: a failure while running, whatever code Abseil's
// ErrnoToStatus gives the errno (EFBIG is InvalidArgument there, EIO DataLoss).
absl::StatusCode WriteFailureCode(int error);
// ErrnoToStatus's message under WriteFailureCode's code.
absl::Status WriteErrnoToStatus(int error, absl::string_view what);

}  // namespace conveyor

#endif  // CONVEYOR_BASE_EXIT_CODE_H_
