// Early returns on absl::Status / absl::StatusOr, with context, in the style of
// Abseil's internal status macros (Debian's abseil ships neither them nor StatusBuilder):
//
//   RETURN_IF_ERROR(file.Append(data, n)) << "writing " << path;
//   ASSIGN_OR_RETURN(Header header, ReadHeader(path));
//   ASSIGN_OR_RETURN(Header header, ReadHeader(path), _ << "--data-path " << prefix);
//
// Context is prepended as "context: message", the code kept: every message in Conveyor
// names what it concerns (a path, a flag, a rank) before what went wrong. (Abseil's
// builder appends "; context" instead.)
#ifndef CONVEYOR_BASE_STATUS_MACROS_H_
#define CONVEYOR_BASE_STATUS_MACROS_H_

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace conveyor {

// A status and the context streamed onto it; converts to absl::Status (and to any
// absl::StatusOr) as "context: message" with the status's code. An OK status, or one
// given no context, converts unchanged.
class StatusBuilder {
 public:
  explicit StatusBuilder(absl::Status status) : status_(std::move(status)) {}

  // Anything absl::StrCat takes: strings, numbers.
  template <typename T>
  StatusBuilder& operator<<(const T& value) {
    absl::StrAppend(&context_, value);
    return *this;
  }

  operator absl::Status() const {  // NOLINT(google-explicit-constructor)
    if (status_.ok() || context_.empty()) return status_;
    return absl::Status(status_.code(), absl::StrCat(context_, ": ", status_.message()));
  }
  template <typename T>
  operator absl::StatusOr<T>() const {  // NOLINT(google-explicit-constructor)
    return absl::StatusOr<T>(static_cast<absl::Status>(*this));
  }

 private:
  absl::Status status_;
  std::string context_;
};

}  // namespace conveyor

#define CONVEYOR_CONCAT_INNER(a, b) a##b
#define CONVEYOR_CONCAT(a, b) CONVEYOR_CONCAT_INNER(a, b)

// Returns the status of `expr` from the enclosing function when it is not OK; context
// may be streamed onto it. A loop, not an if, so that a following `else` is the caller's.
#define RETURN_IF_ERROR(expr)                                                          \
  for (::absl::Status conveyor_status_ = (expr); !conveyor_status_.ok();) /* NOLINT */ \
  return ::conveyor::StatusBuilder(std::move(conveyor_status_))

// ASSIGN_OR_RETURN(lhs, expr): `lhs = value of expr`, or return its status from the
// enclosing function. ASSIGN_OR_RETURN(lhs, expr, error): returns `error` instead, an
// expression of the StatusBuilder `_` holding that status: `_ << "context"`.
#define ASSIGN_OR_RETURN(...)                                              \
  CONVEYOR_ASSIGN_OR_RETURN_PICK(__VA_ARGS__, CONVEYOR_ASSIGN_OR_RETURN_3, \
                                 CONVEYOR_ASSIGN_OR_RETURN_2)              \
  (__VA_ARGS__)
#define CONVEYOR_ASSIGN_OR_RETURN_PICK(lhs, expr, error, macro, ...) macro
#define CONVEYOR_ASSIGN_OR_RETURN_2(lhs, expr) CONVEYOR_ASSIGN_OR_RETURN_3(lhs, expr, _)
#define CONVEYOR_ASSIGN_OR_RETURN_3(lhs, expr, error) \
  CONVEYOR_ASSIGN_OR_RETURN_IMPL(CONVEYOR_CONCAT(conveyor_status_or_, __LINE__), lhs, expr, error)
#define CONVEYOR_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr, error) \
  auto tmp = (expr);                                          \
  if (!tmp.ok()) {                                            \
    ::conveyor::StatusBuilder _(std::move(tmp).status());     \
    return (error);                                           \
  }                                                           \
  lhs = std::move(*tmp)

#endif  // CONVEYOR_BASE_STATUS_MACROS_H_
