// A save interrupted at any point leaves the previous checkpoint loadable and the
// latest file pointing at it; interrupted saves' folders are never read.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "parallel/self_communicator.h"
#include "tests/trainer/checkpoint/checkpoint_test_util.h"
#include "tests/util/test_dirs.h"
#include "trainer/checkpoint/checkpoint_reader.h"
#include "trainer/checkpoint/checkpoint_writer.h"
#include "trainer/checkpoint/file_io.h"
#include "trainer/checkpoint/format.h"

namespace conveyor {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using testing_util::EmptyShard;
using testing_util::FreshDir;
using testing_util::GlobalValue;
using testing_util::LocalShard;
using testing_util::Refs;
using testing_util::StateAt;

absl::Status SaveAt(const std::string& dir, int64_t iteration, int64_t elements = 64) {
  return testing_util::SaveOneTensorCheckpoint(dir, iteration, elements);
}

// Snapshot and Write, then "crash" before Commit: the files are all there, under
// the temporary name.
std::string InterruptedSave(const std::string& dir, int64_t iteration) {
  absl::StatusOr<std::string> temp = testing_util::LeaveInterruptedSave(dir, iteration, 64);
  EXPECT_TRUE(temp.ok()) << temp.status();
  return temp.ok() ? *temp : "";
}

TEST(CrashSafetyTest, EverySaveWritesIntoItsOwnTemporaryFolder) {
  const std::string dir = FreshDir("nonce");
  SelfCommunicator world;
  std::set<std::string> names;
  for (int i = 0; i < 200; ++i) {
    CheckpointWriter writer(dir);
    ASSERT_TRUE(writer.Snapshot(StateAt(5), {}, world, SnapshotMode::kCopy).ok());
    EXPECT_THAT(writer.temp_dir(), MatchesRegex(".*/iter_0000005\\.tmp-[0-9a-f]{12}"));
    names.insert(writer.temp_dir());
  }
  EXPECT_EQ(names.size(), 200u);
}

TEST(CrashSafetyTest, AnInterruptedFirstSaveMeansNoCheckpoint) {
  const std::string dir = FreshDir("first");
  const std::string temp = InterruptedSave(dir, 5);
  EXPECT_THAT(temp, HasSubstr("/iter_0000005.tmp-"));
  EXPECT_TRUE(PathExists(temp + "/rank_00000.bin"));
  const absl::Status status = OpenCheckpoint(dir, std::nullopt).status();
  EXPECT_TRUE(absl::IsNotFound(status));
  EXPECT_THAT(status.message(), HasSubstr("no checkpoint in " + dir));
  // Asking for the iteration explicitly does not find the temporary folder either.
  const absl::Status explicit_step = OpenCheckpoint(dir, 5).status();
  EXPECT_TRUE(absl::IsNotFound(explicit_step));
  EXPECT_THAT(explicit_step.message(), HasSubstr(dir + " holds no committed checkpoint"));
}

TEST(CrashSafetyTest, AnInterruptedSaveLeavesThePreviousOneLatest) {
  const std::string dir = FreshDir("previous");
  ASSERT_TRUE(SaveAt(dir, 5).ok());
  InterruptedSave(dir, 10);
  absl::StatusOr<LoadedCheckpoint> ckpt = OpenCheckpoint(dir, std::nullopt);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  EXPECT_EQ(ckpt->iteration(), 5);
  // A later save of the same iteration uses a fresh folder and commits normally.
  ASSERT_TRUE(SaveAt(dir, 10).ok());
  EXPECT_EQ(*ReadLatestIteration(dir), 10);
  EXPECT_TRUE(OpenCheckpoint(dir, std::nullopt).ok());
}

TEST(CrashSafetyTest, LatestNamingAMissingFolderIsNotFound) {
  const std::string dir = FreshDir("dangling");
  ASSERT_TRUE(SaveAt(dir, 5).ok());
  ASSERT_TRUE(WriteLatestIteration(dir, 9, "x").ok());
  const absl::Status status = OpenCheckpoint(dir, std::nullopt).status();
  EXPECT_TRUE(absl::IsNotFound(status));
  EXPECT_THAT(status.message(),
              HasSubstr("iter_0000009 does not exist although latest_checkpointed_iteration.txt "
                        "names it (committed iterations in " +
                        dir + ": 5)"));
}

TEST(CrashSafetyTest, LeftoversOfInterruptedSavesCanBeRemoved) {
  const std::string dir = FreshDir("cleanup");
  ASSERT_TRUE(SaveAt(dir, 5).ok());
  const std::string temp = InterruptedSave(dir, 10);
  ASSERT_TRUE(WriteFileDurably(dir + "/latest_checkpointed_iteration.txt.tmp-abc", "10\n").ok());
  ASSERT_TRUE(MakeDirs(dir + "/notes.tmp-keep").ok());  // not ours: kept
  absl::StatusOr<std::vector<std::string>> removed = RemoveInterruptedSaves(dir);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_THAT(*removed,
              ::testing::UnorderedElementsAre(temp.substr(dir.size() + 1),
                                              "latest_checkpointed_iteration.txt.tmp-abc"));
  EXPECT_THAT(*ListDir(dir),
              ::testing::ElementsAre("iter_0000005", "latest_checkpointed_iteration.txt",
                                     "notes.tmp-keep"));
  EXPECT_TRUE(OpenCheckpoint(dir, std::nullopt).ok());
  EXPECT_TRUE(RemoveInterruptedSaves(dir + "/absent")->empty());
}

// The real thing: a process saving in a loop is killed with SIGKILL at random
// moments; after each kill the latest checkpoint opens and holds exactly the values
// of the iteration it claims.
TEST(CrashSafetyTest, SigkillDuringSavesLeavesTheLatestCheckpointLoadable) {
  const std::string dir = FreshDir("sigkill");
  constexpr int64_t kElements = 1 << 18;  // 1 MiB per save: kills land mid-write
  std::mt19937 rng(11);
  int64_t next = 1;
  int committed_rounds = 0;
  for (int round = 0; round < 6; ++round) {
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      for (int64_t it = next;; ++it) {
        if (!SaveAt(dir, it, kElements).ok()) _exit(1);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20 + rng() % 80 + 60 * round));
    kill(child, SIGKILL);
    int wstatus = 0;
    waitpid(child, &wstatus, 0);
    ASSERT_TRUE(WIFSIGNALED(wstatus)) << "the saving child exited on its own";

    absl::StatusOr<LoadedCheckpoint> ckpt = OpenCheckpoint(dir, std::nullopt);
    if (absl::IsNotFound(ckpt.status())) continue;  // killed before its first commit
    ASSERT_TRUE(ckpt.ok()) << "round " << round << ": " << ckpt.status();
    ++committed_rounds;
    std::vector<LocalShard> target = {EmptyShard("w", {kElements}, ElementRange(0, kElements))};
    ASSERT_TRUE(LoadTensors(*ckpt, Refs(target)).ok());
    const float offset = static_cast<float>(ckpt->iteration());
    for (int64_t g = 0; g < kElements; g += 997) {
      ASSERT_EQ(target[0].data[g], GlobalValue("w", g) + offset) << "element " << g;
    }
    next = ckpt->iteration() + 1;
  }
  EXPECT_GT(committed_rounds, 0);
  // Committed folders and leftovers of interrupted saves, never a half-renamed one.
  const std::vector<std::string> names = *ListDir(dir);
  for (const std::string& name : names) {
    if (name.rfind("iter_", 0) == 0 && name.find(".tmp-") == std::string::npos) {
      EXPECT_TRUE(PathExists(dir + "/" + name + "/manifest.pb")) << name;
    }
  }
}

}  // namespace
}  // namespace conveyor
