// Saving on file systems that lack what a local disk offers, as NFS does: no atomic
// exchange of two names (renameat2 RENAME_EXCHANGE fails with EINVAL), and, mounted
// without its lock service, no locks at all (flock fails with ENOLCK). This test
// binary defines renameat2 and flock itself, so the checkpoint library's calls reach
// these versions (the executable's definitions come before libc's).
#include <errno.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/trainer/checkpoint/checkpoint_test_util.h"
#include "tests/util/test_dirs.h"
#include "trainer/checkpoint/checkpoint_reader.h"
#include "trainer/checkpoint/checkpoint_writer.h"
#include "trainer/checkpoint/file_io.h"
#include "trainer/checkpoint/format.h"
#include "trainer/checkpoint/save_folder.h"

namespace {
bool g_locks_fail = false;  // flock fails with ENOLCK while set
}  // namespace

extern "C" int renameat2(int olddirfd, const char* oldpath, int newdirfd, const char* newpath,
                         unsigned int flags) {
  if ((flags & RENAME_EXCHANGE) != 0) {
    errno = EINVAL;
    return -1;
  }
  return static_cast<int>(syscall(SYS_renameat2, olddirfd, oldpath, newdirfd, newpath, flags));
}

extern "C" int flock(int fd, int operation) {
  if (g_locks_fail) {
    errno = ENOLCK;
    return -1;
  }
  return static_cast<int>(syscall(SYS_flock, fd, operation));
}

namespace conveyor {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing_util::FreshDir;

// The length of tensor "w" in the checkpoint of `iteration` that `dir` holds: the
// saves below differ in it, so it tells which save is on disk.
int64_t SavedLength(const std::string& dir, int64_t iteration) {
  absl::StatusOr<LoadedCheckpoint> ckpt = OpenCheckpoint(dir, iteration);
  EXPECT_TRUE(ckpt.ok()) << ckpt.status();
  if (!ckpt.ok()) return -1;
  const TensorRecord* w = ckpt->FindTensor("w");
  return w == nullptr ? -1 : w->global_shape(0);
}

TEST(NfsSemanticsTest, TheFileSystemReallyLacksAtomicExchange) {
  const std::string dir = FreshDir("probe");
  ASSERT_TRUE(MakeDirs(dir + "/a").ok() && MakeDirs(dir + "/b").ok());
  const absl::Status exchanged = Exchange(dir + "/a", dir + "/b");
  EXPECT_TRUE(absl::IsUnimplemented(exchanged)) << exchanged;
  EXPECT_THAT(exchanged.message(), HasSubstr("the file system has no atomic exchange"));
}

TEST(NfsSemanticsTest, SavingAnIterationAgainReplacesItWithoutAtomicExchange) {
  const std::string dir = FreshDir("resave");
  ASSERT_TRUE(testing_util::SaveOneTensorCheckpoint(dir, 5, 16).ok());
  ASSERT_TRUE(testing_util::SaveOneTensorCheckpoint(dir, 7, 16).ok());
  // --ckpt-step 5 and training on: iteration 7 is saved again, with other contents.
  const absl::Status resaved = testing_util::SaveOneTensorCheckpoint(dir, 7, 32);
  ASSERT_TRUE(resaved.ok()) << resaved;
  EXPECT_EQ(SavedLength(dir, 7), 32);
  EXPECT_EQ(*ReadLatestIteration(dir), 7);
  EXPECT_THAT(*ListDir(dir),
              ElementsAre("iter_0000005", "iter_0000007", "latest_checkpointed_iteration.txt"));
}

TEST(NfsSemanticsTest, ACrashBetweenTheTwoRenamesIsRepairedAtTheNextStart) {
  const std::string dir = FreshDir("crash");
  ASSERT_TRUE(testing_util::SaveOneTensorCheckpoint(dir, 7, 16).ok());
  // The state a crash leaves after the old folder was moved aside and before the new
  // one took its name: the new save under its temporary name, the old one aside.
  absl::StatusOr<std::string> temp = testing_util::LeaveInterruptedSave(dir, 7, 32);
  ASSERT_TRUE(temp.ok()) << temp.status();
  const std::string aside = *temp + kReplacedSuffix;
  ASSERT_EQ(rename((dir + "/iter_0000007").c_str(), aside.c_str()), 0);
  EXPECT_FALSE(OpenCheckpoint(dir, std::nullopt).ok());  // latest names a missing folder

  absl::StatusOr<std::vector<std::string>> restored = RestoreInterruptedReplacements(dir);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_THAT(*restored, ElementsAre("iter_0000007"));
  EXPECT_EQ(SavedLength(dir, 7), 16);  // the old, complete checkpoint is back
  // An aside folder whose iteration exists again is a leftover, removed like the rest.
  EXPECT_TRUE(RestoreInterruptedReplacements(dir)->empty());
  ASSERT_TRUE(RemoveInterruptedSaves(dir).ok());
  EXPECT_THAT(*ListDir(dir), ElementsAre("iter_0000007", "latest_checkpointed_iteration.txt"));
}

TEST(NfsSemanticsTest, AFileSystemWithoutLocksIsNamedAsSuch) {
  const std::string dir = FreshDir("nolock");
  g_locks_fail = true;
  const absl::Status refused = SaveFolderLock::Acquire(dir).status();
  g_locks_fail = false;
  EXPECT_TRUE(absl::IsFailedPrecondition(refused)) << refused;
  EXPECT_THAT(refused.message(),
              HasSubstr("--save " + dir + ": cannot lock " + dir +
                        "/.conveyor-save.lock: its file system does not support locks (flock: "));
  EXPECT_THAT(refused.message(), HasSubstr("choose a --save folder on a file system with locks"));
  EXPECT_THAT(refused.message(), ::testing::Not(HasSubstr("in use by another run")));
}

}  // namespace
}  // namespace conveyor
