#include "base/exit_code.h"

#include <errno.h>

namespace conveyor {

bool IsInputRefusal(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kDataLoss:
      return true;
    default:
      return false;
  }
}

int ExitCodeFor(const absl::Status& status) {
  if (status.ok()) return kExitOk;
  return IsInputRefusal(status) ? kExitUsage : kExitFailure;
}

absl::StatusCode WriteFailureCode(int error) {
  const bool no_room = error == ENOSPC || error == EDQUOT || error == EFBIG;
  return no_room ? absl::StatusCode::kResourceExhausted : absl::StatusCode::kUnavailable;
}

absl::Status WriteErrnoToStatus(int error, absl::string_view what) {
  return absl::Status(WriteFailureCode(error), absl::ErrnoToStatus(error, what).message());
}

}  // namespace conveyor
