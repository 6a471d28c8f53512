// One run at a time per --save folder (SaveFolderLock), and only the run the folder's
// checkpoints belong to (ClaimSaveFolder), which then removes interrupted saves.
#include "trainer/checkpoint/save_folder.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/trainer/checkpoint/checkpoint_test_util.h"
#include "tests/util/test_dirs.h"
#include "trainer/checkpoint/file_io.h"
#include "trainer/checkpoint/format.h"

namespace conveyor {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using ::testing::UnorderedElementsAre;
using testing_util::FreshDir;

absl::Status SaveAt(const std::string& dir, int64_t iteration, int64_t elements = 16) {
  return testing_util::SaveOneTensorCheckpoint(dir, iteration, elements);
}

// What an interrupted save of `iteration` leaves: its temporary folder.
std::string LeaveInterruptedSave(const std::string& dir, int64_t iteration) {
  absl::StatusOr<std::string> temp = testing_util::LeaveInterruptedSave(dir, iteration);
  EXPECT_TRUE(temp.ok()) << temp.status();
  return temp.ok() ? temp->substr(dir.size() + 1) : "";
}

std::string LockPath(const std::string& dir) { return dir + "/" + kSaveLockFileName; }

TEST(SaveFolderLockTest, ASecondRunIsRefusedNamingTheHolderUntilTheFirstEnds) {
  const std::string dir = FreshDir("lock_twice");
  {
    absl::StatusOr<SaveFolderLock> first = SaveFolderLock::Acquire(dir);
    ASSERT_TRUE(first.ok()) << first.status();
    const std::string holder = *ReadSmallFile(LockPath(dir));
    EXPECT_THAT(holder, StartsWith(absl::StrCat("pid ", getpid(), " on host ")));
    EXPECT_THAT(holder, HasSubstr(" UTC, claim "));

    const absl::Status second = SaveFolderLock::Acquire(dir).status();
    EXPECT_TRUE(absl::IsUnavailable(second)) << second;
    EXPECT_THAT(second.message(),
                HasSubstr(absl::StrCat("--save ", dir, " is in use by another run (pid ", getpid(),
                                       " on host ")));
    EXPECT_THAT(second.message(), HasSubstr(", holds its lock " + LockPath(dir) + ")"));
    EXPECT_THAT(second.message(), HasSubstr("nothing was trained or changed"));
    EXPECT_THAT(second.message(),
                HasSubstr("Wait for that run to end or stop it, or choose another --save folder"));
    EXPECT_EQ(*ReadSmallFile(LockPath(dir)), holder);  // the refused run changed nothing
  }
  // Released: the lock file is gone and the folder (which existed) stays.
  EXPECT_THAT(*ListDir(dir), ElementsAre());
  EXPECT_TRUE(SaveFolderLock::Acquire(dir).ok());
}

TEST(SaveFolderLockTest, AFolderItCreatedGoesWhenNothingWasSavedInIt) {
  const std::string parent = FreshDir("lock_created");
  const std::string unused = parent + "/unused";
  {
    absl::StatusOr<SaveFolderLock> lock = SaveFolderLock::Acquire(unused);
    ASSERT_TRUE(lock.ok()) << lock.status();
    EXPECT_THAT(*ListDir(unused), ElementsAre(kSaveLockFileName));
  }
  EXPECT_FALSE(PathExists(unused));

  const std::string used = parent + "/used";
  {
    absl::StatusOr<SaveFolderLock> lock = SaveFolderLock::Acquire(used);
    ASSERT_TRUE(lock.ok()) << lock.status();
    ASSERT_TRUE(SaveAt(used, 3).ok());
  }
  EXPECT_THAT(*ListDir(used), ElementsAre("iter_0000003", kLatestFileName));
}

TEST(SaveFolderLockTest, AFileIsNoFolder) {
  const std::string file = FreshDir("lock_file") + "/plain";
  ASSERT_TRUE(WriteFileDurably(file, "x").ok());
  const absl::Status status = SaveFolderLock::Acquire(file).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr(file + " is a file, not a folder"));
  EXPECT_EQ(*ReadSmallFile(file), "x");
}

TEST(SaveFolderLockTest, TheKernelReleasesTheLockOfAProcessThatDies) {
  const std::string dir = FreshDir("lock_sigkill");
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    absl::StatusOr<SaveFolderLock> lock = SaveFolderLock::Acquire(dir);
    const char byte = lock.ok() ? 1 : 0;
    if (write(ready[1], &byte, 1) != 1) _exit(2);
    while (true) pause();  // holds the lock until killed
  }
  close(ready[1]);
  char byte = 0;
  ASSERT_EQ(read(ready[0], &byte, 1), 1);
  close(ready[0]);
  ASSERT_EQ(byte, 1) << "the child could not take the lock";

  const absl::Status held = SaveFolderLock::Acquire(dir).status();
  EXPECT_TRUE(absl::IsUnavailable(held)) << held;
  EXPECT_THAT(held.message(), HasSubstr(absl::StrCat("(pid ", child, " on host ")));

  ASSERT_EQ(kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  // The killed run left its lock file, but not its lock.
  EXPECT_TRUE(PathExists(LockPath(dir)));
  absl::StatusOr<SaveFolderLock> after = SaveFolderLock::Acquire(dir);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_THAT(*ReadSmallFile(LockPath(dir)), StartsWith(absl::StrCat("pid ", getpid(), " ")));
}

TEST(ClaimSaveFolderTest, AFolderWithoutCheckpointsIsAnyRunsAndLosesItsLeftovers) {
  const std::string dir = FreshDir("claim_leftovers");
  const std::string leftover = LeaveInterruptedSave(dir, 5);
  ASSERT_TRUE(WriteFileDurably(dir + "/" + kLatestFileName + ".tmp-abc", "5\n").ok());
  absl::StatusOr<SaveFolderClaim> claim = ClaimSaveFolder(dir, {}, false);
  ASSERT_TRUE(claim.ok()) << claim.status();
  EXPECT_THAT(claim->removed,
              UnorderedElementsAre(leftover, std::string(kLatestFileName) + ".tmp-abc"));
  EXPECT_THAT(claim->overwritten, ElementsAre());
  EXPECT_THAT(*ListDir(dir), ElementsAre());
}

TEST(ClaimSaveFolderTest, ARunThatDoesNotResumeFromTheFolderIsRefused) {
  const std::string dir = FreshDir("claim_other");
  ASSERT_TRUE(SaveAt(dir, 5).ok());
  ASSERT_TRUE(SaveAt(dir, 10).ok());
  const std::string leftover = LeaveInterruptedSave(dir, 15);
  const std::vector<std::string> before = *ListDir(dir);
  const std::string other = FreshDir("claim_other_load");
  const std::string held =
      absl::StrCat("--save ", dir, " holds another run's checkpoints (latest iteration 10) and ");
  struct Case {
    RunOrigin origin;
    std::string why;
  };
  const Case cases[] = {
      {{}, "this run starts from scratch (no --load)"},
      {{other, std::nullopt, false},
       absl::StrCat("this run starts from scratch (--load ", other, " holds no checkpoint)")},
      {{other, 7, false},
       absl::StrCat("this run resumes from --load ", other, " (iteration 7), another folder")},
      {{dir, 10, true}, absl::StrCat("--finetune restarts at iteration 0 (from --load ", dir, ")")},
  };
  for (const Case& c : cases) {
    const absl::Status status = ClaimSaveFolder(dir, c.origin, false).status();
    EXPECT_TRUE(absl::IsFailedPrecondition(status)) << status;
    EXPECT_THAT(status.message(), HasSubstr(held + c.why + ": its saves would replace"));
    EXPECT_THAT(status.message(), HasSubstr("move latest_checkpointed_iteration.txt, mixing two "
                                            "runs, so it stops (nothing was trained or changed)"));
    EXPECT_THAT(status.message(),
                HasSubstr(absl::StrCat("To resume that run, pass --load ", dir,
                                       "; to keep it, choose another --save folder; to save over "
                                       "it, pass --overwrite-save")));
    EXPECT_EQ(*ListDir(dir), before) << "refused, yet changed: " << c.why;
  }
  // --overwrite-save accepts each of them; the first removes the leftover. The other
  // run's iterations stay until this run has committed one of its own.
  std::vector<std::string> removed;
  for (const Case& c : cases) {
    absl::StatusOr<SaveFolderClaim> now = ClaimSaveFolder(dir, c.origin, true);
    ASSERT_TRUE(now.ok()) << now.status();
    removed.insert(removed.end(), now->removed.begin(), now->removed.end());
    EXPECT_THAT(now->overwritten, ElementsAre(5, 10));
  }
  EXPECT_THAT(removed, ElementsAre(leftover));
  EXPECT_THAT(*ListDir(dir), ElementsAre("iter_0000005", "iter_0000010", kLatestFileName));
}

TEST(ClaimSaveFolderTest, CommittedFoldersWithoutALatestFileAreCheckpointsToo) {
  const std::string dir = FreshDir("claim_no_latest");
  ASSERT_TRUE(SaveAt(dir, 5).ok());
  ASSERT_TRUE(SaveAt(dir, 10).ok());
  ASSERT_TRUE(RemoveFile(dir + "/" + kLatestFileName).ok());
  const absl::Status status = ClaimSaveFolder(dir, {}, false).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(status)) << status;
  EXPECT_THAT(status.message(),
              HasSubstr("holds another run's checkpoints (iterations 5, 10, no readable "
                        "latest_checkpointed_iteration.txt)"));
}

TEST(ClaimSaveFolderTest, TheFolderIsTheRunsThatResumesFromIt) {
  const std::string dir = FreshDir("claim_own");
  ASSERT_TRUE(SaveAt(dir, 5).ok());
  ASSERT_TRUE(SaveAt(dir, 10).ok());
  const std::string leftover = LeaveInterruptedSave(dir, 15);
  // --load spelt another way, and --ckpt-step rewinding to iteration 5.
  const std::string link = FreshDir("claim_own_link") + "/to_dir";
  ASSERT_EQ(symlink(dir.c_str(), link.c_str()), 0);
  for (const RunOrigin& origin : {RunOrigin{dir + "/.", 10, false}, RunOrigin{link, 5, false}}) {
    absl::StatusOr<SaveFolderClaim> claim = ClaimSaveFolder(dir, origin, false);
    ASSERT_TRUE(claim.ok()) << claim.status();
    EXPECT_THAT(claim->overwritten, ElementsAre()) << "its own checkpoints are not another run's";
  }
  EXPECT_THAT(*ListDir(dir), ElementsAre("iter_0000005", "iter_0000010", kLatestFileName));
}

TEST(ClaimSaveFolderTest, OverwrittenIterationsGoOnceTheNewRunHasCommittedItsOwn) {
  const std::string dir = FreshDir("retire");
  for (int64_t it : {5, 10, 15, 20}) ASSERT_TRUE(SaveAt(dir, it).ok());
  absl::StatusOr<SaveFolderClaim> claim = ClaimSaveFolder(dir, {}, /*overwrite=*/true);
  ASSERT_TRUE(claim.ok()) << claim.status();
  ASSERT_THAT(claim->overwritten, ElementsAre(5, 10, 15, 20));
  // The new run saved 5 and 10 (replacing the old run's); 15 and 20 are the old run's
  // and would let a later --ckpt-step 20 resume from it.
  ASSERT_TRUE(SaveAt(dir, 5, 32).ok());
  ASSERT_TRUE(SaveAt(dir, 10, 32).ok());
  absl::StatusOr<std::vector<std::string>> retired =
      RetireOverwrittenCheckpoints(dir, claim->overwritten, {5, 10});
  ASSERT_TRUE(retired.ok()) << retired.status();
  EXPECT_THAT(*retired, ElementsAre("iter_0000015", "iter_0000020"));
  EXPECT_THAT(*ListDir(dir), ElementsAre("iter_0000005", "iter_0000010", kLatestFileName));
  EXPECT_EQ(*ReadLatestIteration(dir), 10);
}

}  // namespace
}  // namespace conveyor
