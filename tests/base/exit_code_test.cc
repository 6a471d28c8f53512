#include "base/exit_code.h"

#include <cerrno>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace conveyor {
namespace {

TEST(ExitCodeTest, RefusalsOfInputExitTwo) {
  EXPECT_EQ(ExitCodeFor(absl::InvalidArgumentError("--lr -1")), 2);
  EXPECT_EQ(ExitCodeFor(absl::FailedPreconditionError("ranks differ")), 2);
  EXPECT_EQ(ExitCodeFor(absl::NotFoundError("no such data file")), 2);
  EXPECT_EQ(ExitCodeFor(absl::OutOfRangeError("token id past the vocabulary")), 2);
  EXPECT_EQ(ExitCodeFor(absl::AlreadyExistsError("rank 1 was claimed")), 2);
  // A file the user named but this process may not read.
  EXPECT_EQ(ExitCodeFor(absl::ErrnoToStatus(EACCES, "open data.bin")), 2);
  EXPECT_EQ(ExitCodeFor(absl::ErrnoToStatus(ENOENT, "open data.bin")), 2);
  // A damaged file read: a checkpoint's checksum, a truncated dataset.
  EXPECT_EQ(ExitCodeFor(absl::DataLossError("checksum mismatch")), 2);
}

TEST(ExitCodeTest, FailuresWhileRunningExitOne) {
  EXPECT_EQ(ExitCodeFor(absl::ErrnoToStatus(ENOSPC, "write metrics.jsonl")), 1);
  EXPECT_EQ(ExitCodeFor(absl::ErrnoToStatus(EIO, "read data.bin")), 1);
  EXPECT_EQ(ExitCodeFor(absl::DeadlineExceededError("all-reduce timed out")), 1);
  EXPECT_EQ(ExitCodeFor(absl::UnavailableError("peer closed the connection")), 1);
  EXPECT_EQ(ExitCodeFor(absl::ResourceExhaustedError("out of host memory")), 1);
  EXPECT_EQ(ExitCodeFor(absl::InternalError("NaN loss")), 1);
  EXPECT_EQ(ExitCodeFor(absl::AbortedError("rank 2 failed")), 1);
}

TEST(ExitCodeTest, SuccessExitsZero) { EXPECT_EQ(ExitCodeFor(absl::OkStatus()), 0); }

// A write of an open file that fails is a failure while running, whatever code Abseil
// gives its errno: EFBIG (past `ulimit -f`) is InvalidArgument there, EIO DataLoss.
TEST(ExitCodeTest, FailedWritesExitOneWhateverTheirErrno) {
  for (const int error : {EFBIG, ENOSPC, EDQUOT}) {
    const absl::Status status = WriteErrnoToStatus(error, "cannot write rank_00000.bin");
    EXPECT_TRUE(absl::IsResourceExhausted(status)) << status;
    EXPECT_EQ(status.message(),
              absl::ErrnoToStatus(error, "cannot write rank_00000.bin").message());
    EXPECT_EQ(ExitCodeFor(status), 1);
  }
  for (const int error : {EIO, EROFS}) {
    const absl::Status status = WriteErrnoToStatus(error, "cannot fsync manifest.pb");
    EXPECT_TRUE(absl::IsUnavailable(status)) << status;
    EXPECT_EQ(ExitCodeFor(status), 1);
  }
}

}  // namespace
}  // namespace conveyor
