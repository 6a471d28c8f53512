// A run keeps its --save folder only while the folder's lock file is the one it locked
// and still holds its claim: before each commit it checks, and a run that lost the
// folder (lock file removed, folder moved, a run on another host that took "the" lock
// too) stops without renaming anything or moving the latest file.
#include <stdio.h>
#include <unistd.h>

#include <optional>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/trainer/checkpoint/checkpoint_test_util.h"
#include "tests/util/test_dirs.h"
#include "trainer/checkpoint/file_io.h"
#include "trainer/checkpoint/format.h"
#include "trainer/checkpoint/save_folder.h"

namespace conveyor {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using testing_util::FreshDir;

std::string LockPath(const std::string& dir) { return dir + "/" + kSaveLockFileName; }

// What a run on another node writes when its own lock service let it in as well.
constexpr char kOtherHostsClaim[] =
    "pid 77 on host node9, since 2026-01-01 00:00:00 UTC, claim 00000000deadbeef\n";

TEST(SaveFolderOwnershipTest, TheLockFileCarriesAClaimThatDiffersPerRun) {
  const std::string dir = FreshDir("claim");
  std::string first_claim;
  {
    absl::StatusOr<SaveFolderLock> lock = SaveFolderLock::Acquire(dir);
    ASSERT_TRUE(lock.ok()) << lock.status();
    EXPECT_THAT(lock->claim_line(),
                MatchesRegex(absl::StrCat("pid ", getpid(),
                                          " on host .+, since .+ UTC, claim [0-9a-f]{16}\n")));
    EXPECT_EQ(*ReadSmallFile(LockPath(dir)), lock->claim_line());
    EXPECT_TRUE(lock->VerifyOwnership().ok());
    first_claim = lock->claim_line();
  }
  absl::StatusOr<SaveFolderLock> again = SaveFolderLock::Acquire(dir);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_NE(again->claim_line(), first_claim);
}

TEST(SaveFolderOwnershipTest, ARemovedLockFileEndsOwnership) {
  const std::string dir = FreshDir("removed");
  absl::StatusOr<SaveFolderLock> lock = SaveFolderLock::Acquire(dir);
  ASSERT_TRUE(lock.ok()) << lock.status();
  ASSERT_EQ(unlink(LockPath(dir).c_str()), 0);  // a tmp cleaner, rm -rf D/.*
  const absl::Status lost = lock->VerifyOwnership();
  EXPECT_TRUE(absl::IsAborted(lost)) << lost;
  EXPECT_THAT(lost.message(), HasSubstr("--save " + dir + " is no longer this run's: its lock file " +
                                        LockPath(dir) + " was removed while the run was training"));
  EXPECT_THAT(lost.message(), HasSubstr("this run stops without writing"));
}

TEST(SaveFolderOwnershipTest, ASecondRunThatTookTheFolderAfterTheRemovalIsNamed) {
  const std::string dir = FreshDir("taken");
  std::optional<absl::StatusOr<SaveFolderLock>> first = SaveFolderLock::Acquire(dir);
  ASSERT_TRUE(first->ok()) << first->status();
  ASSERT_EQ(unlink(LockPath(dir).c_str()), 0);
  absl::StatusOr<SaveFolderLock> second = SaveFolderLock::Acquire(dir);
  ASSERT_TRUE(second.ok()) << second.status();  // nothing kept it out: the file was gone

  const absl::Status lost = (*first)->VerifyOwnership();
  EXPECT_TRUE(absl::IsAborted(lost)) << lost;
  EXPECT_THAT(lost.message(), HasSubstr("was replaced and another run claimed it (" +
                                        std::string(absl::StripAsciiWhitespace(
                                            second->claim_line())) +
                                        ")"));
  // The first run ends: it releases its lock without removing the second's file.
  first.reset();
  EXPECT_EQ(*ReadSmallFile(LockPath(dir)), second->claim_line());
  EXPECT_TRUE(second->VerifyOwnership().ok());
}

TEST(SaveFolderOwnershipTest, AMovedOrDeletedFolderEndsOwnership) {
  const std::string parent = FreshDir("moved");
  const std::string dir = parent + "/run";
  absl::StatusOr<SaveFolderLock> lock = SaveFolderLock::Acquire(dir);
  ASSERT_TRUE(lock.ok()) << lock.status();
  ASSERT_EQ(rename(dir.c_str(), (parent + "/elsewhere").c_str()), 0);
  const absl::Status lost = lock->VerifyOwnership();
  EXPECT_TRUE(absl::IsAborted(lost)) << lost;
  EXPECT_THAT(lost.message(),
              HasSubstr("is no longer this run's: the folder was moved or deleted while the run "
                        "was training"));
}

TEST(SaveFolderOwnershipTest, AnotherHostsClaimInTheSameFileEndsOwnership) {
  const std::string dir = FreshDir("other_host");
  absl::StatusOr<SaveFolderLock> lock = SaveFolderLock::Acquire(dir);
  ASSERT_TRUE(lock.ok()) << lock.status();
  // The same file (same inode), rewritten by a run whose flock did not see ours.
  ASSERT_TRUE(WriteFileDurably(LockPath(dir), kOtherHostsClaim).ok());
  const absl::Status lost = lock->VerifyOwnership();
  EXPECT_TRUE(absl::IsAborted(lost)) << lost;
  EXPECT_THAT(lost.message(),
              HasSubstr("another run claimed its lock file " + LockPath(dir) +
                        " (pid 77 on host node9, since 2026-01-01 00:00:00 UTC, claim "
                        "00000000deadbeef): the file system's locks hold only on one host"));
}

TEST(SaveFolderOwnershipTest, ACommitAfterOwnershipEndedRenamesNothingAndKeepsLatest) {
  const std::string dir = FreshDir("commit");
  absl::StatusOr<SaveFolderLock> lock = SaveFolderLock::Acquire(dir);
  ASSERT_TRUE(lock.ok()) << lock.status();
  const CommitGuard guard = [&] { return lock->VerifyOwnership(); };
  ASSERT_TRUE(testing_util::SaveOneTensorCheckpoint(dir, 5, 16, guard).ok());

  ASSERT_TRUE(WriteFileDurably(LockPath(dir), kOtherHostsClaim).ok());
  const absl::Status refused = testing_util::SaveOneTensorCheckpoint(dir, 10, 16, guard);
  EXPECT_TRUE(absl::IsAborted(refused)) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("checkpoint " + dir + "/iter_0000010"));
  EXPECT_THAT(refused.message(), HasSubstr("another run claimed its lock file"));
  // The other run's view of the folder is untouched: no iteration 10, latest still 5.
  EXPECT_THAT(*ListDir(dir), ElementsAre(kSaveLockFileName, "iter_0000005",
                                         "latest_checkpointed_iteration.txt"));
  EXPECT_EQ(*ReadLatestIteration(dir), 5);
}

TEST(SaveFolderOwnershipTest, ASaveNeverRecreatesAFolderThatWasDeleted) {
  const std::string parent = FreshDir("deleted");
  const std::string dir = parent + "/run";
  ASSERT_TRUE(MakeDirs(dir).ok());
  ASSERT_TRUE(testing_util::SaveOneTensorCheckpoint(dir, 5).ok());
  ASSERT_TRUE(RemoveTree(dir).ok());
  const absl::Status refused = testing_util::SaveOneTensorCheckpoint(dir, 10);
  EXPECT_TRUE(absl::IsAborted(refused)) << refused;
  EXPECT_THAT(refused.message(),
              HasSubstr("the save folder " + dir +
                        " no longer exists (moved or deleted while the run was training?)"));
  EXPECT_FALSE(PathExists(dir));
}

}  // namespace
}  // namespace conveyor
