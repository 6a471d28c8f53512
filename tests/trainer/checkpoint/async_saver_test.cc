// --async-save: the snapshot is what gets saved even when training changes the
// tensors at once; at most one save is in flight; nothing is visible before commit;
// errors reach every rank at Finish.
#include "trainer/checkpoint/async_saver.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "parallel/self_communicator.h"
#include "tests/trainer/checkpoint/checkpoint_test_util.h"
#include "tests/util/in_process_world.h"
#include "tests/util/test_dirs.h"
#include "trainer/checkpoint/checkpoint_reader.h"
#include "trainer/checkpoint/format.h"

namespace conveyor {
namespace {

using ::testing::HasSubstr;
using testing_util::BlockRuns;
using testing_util::CountWrong;
using testing_util::EmptyShard;
using testing_util::FilledShard;
using testing_util::FreshDir;
using testing_util::LocalShard;
using testing_util::Refs;
using testing_util::StateAt;

int64_t WrongInCheckpoint(const std::string& dir, std::optional<int64_t> iteration) {
  absl::StatusOr<LoadedCheckpoint> ckpt = OpenCheckpoint(dir, iteration);
  EXPECT_TRUE(ckpt.ok()) << ckpt.status();
  if (!ckpt.ok()) return -1;
  std::vector<LocalShard> target = {EmptyShard("w", {256}, ElementRange(0, 256))};
  EXPECT_TRUE(LoadTensors(*ckpt, Refs(target)).ok());
  return CountWrong(target[0]);
}

TEST(AsyncSaverTest, SavesTheSnapshotWhileTrainingChangesTheTensors) {
  const std::string dir = FreshDir("async_snapshot");
  SelfCommunicator world;
  AsyncCheckpointSaver saver(dir);
  std::vector<LocalShard> shards = {FilledShard("w", {256}, ElementRange(0, 256))};
  ASSERT_TRUE(saver.Start(StateAt(10), Refs(shards), world).ok());
  EXPECT_TRUE(saver.in_flight());
  EXPECT_EQ(saver.in_flight_iteration(), 10);
  for (float& v : shards[0].data) v = -1.0f;  // the next training step
  // Nothing is visible until the commit.
  EXPECT_TRUE(absl::IsNotFound(ReadLatestIteration(dir).status()));
  ASSERT_TRUE(saver.Finish(world).ok());
  EXPECT_FALSE(saver.in_flight());
  EXPECT_EQ(*ReadLatestIteration(dir), 10);
  EXPECT_EQ(WrongInCheckpoint(dir, std::nullopt), 0);
  EXPECT_EQ(saver.last_write_stats().bytes, 1024);
  EXPECT_TRUE(saver.Finish(world).ok());  // nothing in flight: a no-op
}

TEST(AsyncSaverTest, TheNextStartCommitsTheSaveInFlight) {
  const std::string dir = FreshDir("async_two");
  SelfCommunicator world;
  AsyncCheckpointSaver saver(dir);
  std::vector<LocalShard> shards = {FilledShard("w", {256}, ElementRange(0, 256))};
  ASSERT_TRUE(saver.Start(StateAt(10), Refs(shards), world).ok());
  ASSERT_TRUE(saver.Start(StateAt(20), Refs(shards), world).ok());
  EXPECT_EQ(*ReadLatestIteration(dir), 10);  // committed by the second Start
  ASSERT_TRUE(saver.Finish(world).ok());
  EXPECT_EQ(*ReadLatestIteration(dir), 20);
  EXPECT_EQ(WrongInCheckpoint(dir, 10), 0);
  EXPECT_EQ(WrongInCheckpoint(dir, 20), 0);
}

TEST(AsyncSaverTest, SeveralRanksSaveAsynchronously) {
  const std::string dir = FreshDir("async_ranks");
  testing_util::InProcessWorld world(4);
  const std::vector<absl::Status> results = world.Run([&](int rank, Communicator& comm) {
    AsyncCheckpointSaver saver(dir);
    std::vector<LocalShard> shards = {FilledShard("w", {256}, BlockRuns({256}, 0, 4, rank))};
    absl::Status status = saver.Start(StateAt(30), Refs(shards), comm);
    if (!status.ok()) return status;
    shards[0].data.assign(shards[0].data.size(), 0.0f);
    return saver.Finish(comm);
  });
  for (const absl::Status& s : results) EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(WrongInCheckpoint(dir, std::nullopt), 0);
}

TEST(AsyncSaverTest, AFailureOnOneRankIsReportedByFinishOnEveryRank) {
  const std::string dir = FreshDir("async_failure");
  testing_util::InProcessWorld world(2);
  const std::vector<absl::Status> results = world.Run([&](int rank, Communicator& comm) {
    AsyncCheckpointSaver saver(dir);
    std::vector<LocalShard> shards = {FilledShard("w", {256}, BlockRuns({256}, 0, 2, rank))};
    if (rank == 1) shards[0].global_shape = {-256};
    absl::Status status = saver.Start(StateAt(40), Refs(shards), comm);
    if (!status.ok()) return absl::InternalError("Start should defer errors");
    return saver.Finish(comm);
  });
  EXPECT_TRUE(absl::IsInvalidArgument(results[1])) << results[1];
  EXPECT_THAT(results[1].message(), HasSubstr("negative dimension"));
  EXPECT_TRUE(absl::IsAborted(results[0])) << results[0];
  EXPECT_TRUE(absl::IsNotFound(ReadLatestIteration(dir).status()));
}

}  // namespace
}  // namespace conveyor
