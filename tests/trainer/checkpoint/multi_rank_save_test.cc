// A save by several ranks either commits on every rank or on none: a failure on any
// rank reaches all of them, and the previous checkpoint stays the latest.
#include <functional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/trainer/checkpoint/checkpoint_test_util.h"
#include "tests/util/in_process_world.h"
#include "tests/util/test_dirs.h"
#include "trainer/checkpoint/checkpoint_reader.h"
#include "trainer/checkpoint/checkpoint_writer.h"
#include "trainer/checkpoint/file_io.h"
#include "trainer/checkpoint/format.h"

namespace conveyor {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing_util::BlockRuns;
using testing_util::FilledShard;
using testing_util::FreshDir;
using testing_util::InProcessWorld;
using testing_util::LocalShard;
using testing_util::Refs;

constexpr int kRanks = 3;

// Rank r holds rows [2r, 2r + 2) of a [6, 4] matrix and, on rank 0, a bias.
std::vector<LocalShard> GoodShards(int rank) {
  std::vector<LocalShard> shards;
  shards.push_back(FilledShard("w", {6, 4}, BlockRuns({6, 4}, 0, kRanks, rank)));
  if (rank == 0) shards.push_back(FilledShard("b", {4}, ElementRange(0, 4)));
  return shards;
}

CheckpointState StateAt(int64_t iteration) {
  CheckpointState state;
  state.iteration = iteration;
  return state;
}

// Saves iteration `iteration` from every rank, with `edit` changing rank r's shards.
std::vector<absl::Status> SaveAll(
    const std::string& dir, int64_t iteration,
    const std::function<void(int, std::vector<LocalShard>&, CheckpointState&)>& edit) {
  InProcessWorld world(kRanks);
  return world.Run([&](int rank, Communicator& comm) {
    std::vector<LocalShard> shards = GoodShards(rank);
    CheckpointState state = StateAt(iteration);
    edit(rank, shards, state);
    return SaveCheckpoint(dir, state, Refs(shards), comm);
  });
}

void ExpectOnlyCheckpoint(const std::string& dir, int64_t iteration) {
  EXPECT_EQ(*ReadLatestIteration(dir), iteration);
  EXPECT_THAT(*ListDir(dir), ElementsAre(IterationDirName(iteration), kLatestFileName));
  EXPECT_TRUE(OpenCheckpoint(dir, std::nullopt).ok());
}

TEST(MultiRankSaveTest, AllRanksCommitTogether) {
  const std::string dir = FreshDir("together");
  const std::vector<absl::Status> results = SaveAll(dir, 5, [](int, auto&, auto&) {});
  for (const absl::Status& s : results) EXPECT_TRUE(s.ok()) << s;
  ExpectOnlyCheckpoint(dir, 5);
  EXPECT_THAT(*ListDir(dir + "/iter_0000005"),
              ElementsAre("manifest.pb", "rank_00000.bin", "rank_00001.bin", "rank_00002.bin"));
}

TEST(MultiRankSaveTest, ARankWithBadArgumentsFailsTheSaveOnEveryRank) {
  const std::string dir = FreshDir("bad_rank");
  ASSERT_TRUE(SaveAll(dir, 5, [](int, auto&, auto&) {})[0].ok());
  const std::vector<absl::Status> results =
      SaveAll(dir, 10, [](int rank, std::vector<LocalShard>& shards, CheckpointState&) {
        if (rank == 2) shards[0].data.resize(3);
      });
  EXPECT_TRUE(absl::IsInvalidArgument(results[2])) << results[2];
  EXPECT_THAT(results[2].message(), HasSubstr("rank 2"));
  for (int r : {0, 1}) {
    EXPECT_TRUE(absl::IsAborted(results[r])) << results[r];
    EXPECT_THAT(results[r].message(), HasSubstr("rank(s) 2 failed to write their shards"));
  }
  ExpectOnlyCheckpoint(dir, 5);  // the failed save left nothing behind
}

TEST(MultiRankSaveTest, ElementsSavedTwiceAreRefusedBeforeAnythingIsVisible) {
  const std::string dir = FreshDir("twice");
  ASSERT_TRUE(SaveAll(dir, 5, [](int, auto&, auto&) {})[0].ok());
  // Every rank passes its replica of the bias, as if DP ranks all wrote.
  const std::vector<absl::Status> results =
      SaveAll(dir, 10, [](int rank, std::vector<LocalShard>& shards, CheckpointState&) {
        if (rank != 0) shards.push_back(FilledShard("b", {4}, ElementRange(0, 4)));
      });
  EXPECT_TRUE(absl::IsInvalidArgument(results[0])) << results[0];
  EXPECT_THAT(results[0].message(), HasSubstr("tensor b: global elements [0, 4) are stored "
                                              "twice, by rank 0 (rank_00000.bin) and by rank 1"));
  for (int r : {1, 2}) {
    EXPECT_TRUE(absl::IsAborted(results[r])) << results[r];
    EXPECT_THAT(results[r].message(), HasSubstr("not committed by rank 0"));
  }
  ExpectOnlyCheckpoint(dir, 5);
}

TEST(MultiRankSaveTest, ElementsSavedByNobodyAreRefused) {
  const std::string dir = FreshDir("nobody");
  const std::vector<absl::Status> results =
      SaveAll(dir, 10, [](int rank, std::vector<LocalShard>& shards, CheckpointState&) {
        if (rank == 1) shards.erase(shards.begin());  // rows 2-3 of w go missing
      });
  EXPECT_THAT(results[0].message(),
              HasSubstr("tensor w of shape [6, 4]: global elements [8, 16) are stored by no rank"));
  EXPECT_TRUE(absl::IsNotFound(ReadLatestIteration(dir).status()));
  EXPECT_TRUE(ListDir(dir)->empty());
}

TEST(MultiRankSaveTest, ShapesThatDisagreeAcrossRanksAreNamed) {
  const std::string dir = FreshDir("shapes");
  const std::vector<absl::Status> results =
      SaveAll(dir, 10, [](int rank, std::vector<LocalShard>& shards, CheckpointState&) {
        if (rank == 2) shards[0].global_shape = {12, 2};
      });
  EXPECT_THAT(results[0].message(),
              HasSubstr("tensor w has global shape [6, 4] on rank 0 but [12, 2] on rank 2"));
}

TEST(MultiRankSaveTest, RanksSavingDifferentIterationsAreCaught) {
  const std::string dir = FreshDir("iterations");
  const std::vector<absl::Status> results =
      SaveAll(dir, 10, [](int rank, std::vector<LocalShard>&, CheckpointState& state) {
        if (rank == 1) state.iteration = 11;
      });
  EXPECT_THAT(results[1].message(), HasSubstr("rank 1 saves iteration 11 but rank 0 saves "
                                              "iteration 10"));
  EXPECT_TRUE(absl::IsAborted(results[0]));
  EXPECT_TRUE(absl::IsNotFound(ReadLatestIteration(dir).status()));
}

TEST(MultiRankSaveTest, RngStatesAreKeptPerRank) {
  const std::string dir = FreshDir("rng");
  ASSERT_TRUE(SaveAll(dir, 3,
                      [](int rank, auto&, CheckpointState& state) {
                        state.rng_states = {{"dropout", "state of rank " + std::to_string(rank)}};
                      })[0]
                  .ok());
  absl::StatusOr<LoadedCheckpoint> ckpt = OpenCheckpoint(dir, std::nullopt);
  ASSERT_TRUE(ckpt.ok());
  for (int r = 0; r < kRanks; ++r) {
    const CheckpointState state = ckpt->State(r);
    ASSERT_EQ(state.rng_states.size(), 1u);
    EXPECT_EQ(state.rng_states[0].state, "state of rank " + std::to_string(r));
  }
}

}  // namespace
}  // namespace conveyor
