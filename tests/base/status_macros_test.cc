#include "base/status_macros.h"

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gtest/gtest.h"

namespace conveyor {
namespace {

absl::Status FailIf(bool fail) {
  return fail ? absl::NotFoundError("no such file") : absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<int>> MakeOrFail(bool fail) {
  if (fail) return absl::NotFoundError("no such file");
  return std::make_unique<int>(7);
}

absl::Status ReturnIfError(bool fail) {
  RETURN_IF_ERROR(FailIf(fail)) << "reading "
                                << "x.idx"
                                << " (rank " << 3 << ")";
  return absl::OkStatus();
}

TEST(StatusMacrosTest, ReturnIfErrorPrependsContextAndKeepsTheCode) {
  EXPECT_TRUE(ReturnIfError(false).ok());
  EXPECT_EQ(ReturnIfError(true), absl::NotFoundError("reading x.idx (rank 3): no such file"));
}

absl::StatusOr<int> AssignOrReturn(bool fail, bool with_context) {
  if (with_context) {
    ASSIGN_OR_RETURN(std::unique_ptr<int> p, MakeOrFail(fail), _ << "--data-path");
    return *p;
  }
  ASSIGN_OR_RETURN(const std::unique_ptr<int> p, MakeOrFail(fail));
  return *p;
}

TEST(StatusMacrosTest, AssignOrReturnMovesTheValueOrReturnsTheStatus) {
  EXPECT_EQ(*AssignOrReturn(false, false), 7);
  EXPECT_EQ(*AssignOrReturn(false, true), 7);
  EXPECT_EQ(AssignOrReturn(true, false).status(), absl::NotFoundError("no such file"));
  EXPECT_EQ(AssignOrReturn(true, true).status(), absl::NotFoundError("--data-path: no such file"));
}

// The macro is one statement: an `else` after it belongs to the caller's `if`.
absl::Status InIfElse(bool branch) {
  if (branch)
    RETURN_IF_ERROR(FailIf(true)) << "then";
  else
    RETURN_IF_ERROR(FailIf(true)) << "else";
  return absl::OkStatus();
}

TEST(StatusMacrosTest, ElseBindsToTheCallersIf) {
  EXPECT_EQ(InIfElse(true).message(), "then: no such file");
  EXPECT_EQ(InIfElse(false).message(), "else: no such file");
}

TEST(StatusBuilderTest, OkAndContextFreeStatusesPassUnchanged) {
  EXPECT_TRUE(static_cast<absl::Status>(StatusBuilder(absl::OkStatus()) << "context").ok());
  EXPECT_EQ(static_cast<absl::Status>(StatusBuilder(absl::InternalError("x"))),
            absl::InternalError("x"));
}

}  // namespace
}  // namespace conveyor
