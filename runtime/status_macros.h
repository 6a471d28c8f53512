// Early-return helpers for absl::Status / StatusOr (Debian's abseil has none).
#ifndef CONVEYOR_RUNTIME_STATUS_MACROS_H_
#define CONVEYOR_RUNTIME_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define CONVEYOR_CONCAT_INNER(a, b) a##b
#define CONVEYOR_CONCAT(a, b) CONVEYOR_CONCAT_INNER(a, b)

// Returns the status from the enclosing function when `expr` is not OK.
#define RETURN_IF_ERROR(expr)            \
  do {                                   \
    const absl::Status _status = (expr); \
    if (!_status.ok()) return _status;   \
  } while (0)

// `lhs = value of expr`, or return its status from the enclosing function.
#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL(CONVEYOR_CONCAT(_status_or_, __LINE__), lhs, expr)
#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                          \
  if (!tmp.ok()) return tmp.status();         \
  lhs = std::move(*tmp)

#endif  // CONVEYOR_RUNTIME_STATUS_MACROS_H_
