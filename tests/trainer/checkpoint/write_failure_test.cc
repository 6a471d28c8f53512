// A save that cannot be written (a file size limit, a full disk) fails as a failure while
// running (exit 1), not as a refusal of input, and leaves the previous checkpoint latest.
#include <signal.h>
#include <sys/resource.h>

#include <string>

#include "base/exit_code.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/trainer/checkpoint/checkpoint_test_util.h"
#include "tests/util/test_dirs.h"
#include "trainer/checkpoint/file_io.h"
#include "trainer/checkpoint/format.h"

namespace conveyor {
namespace {

using ::testing::HasSubstr;

TEST(WriteFailureTest, ASaveBeyondTheFileSizeLimitIsAFailureWhileRunning) {
  const std::string dir = testing_util::FreshDir("fsize");
  ASSERT_TRUE(testing_util::SaveOneTensorCheckpoint(dir, 5, 16).ok());
  // As the trainer does, so that the write fails with EFBIG instead of killing us.
  signal(SIGXFSZ, SIG_IGN);
  struct rlimit saved;
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &saved), 0);
  struct rlimit tight = saved;
  tight.rlim_cur = 64 * 1024;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &tight), 0);
  const absl::Status failed = testing_util::SaveOneTensorCheckpoint(dir, 10, 1 << 16);  // 256 KiB
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &saved), 0);

  EXPECT_TRUE(absl::IsResourceExhausted(failed)) << failed;
  EXPECT_THAT(failed.message(), HasSubstr("cannot write " + dir + "/iter_0000010.tmp-"));
  EXPECT_EQ(ExitCodeFor(failed), 1);
  EXPECT_EQ(*ReadLatestIteration(dir), 5);
}

}  // namespace
}  // namespace conveyor
