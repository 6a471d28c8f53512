// The ranks build the training data in turns (training_data_turns.h): ranks given their
// own --data-cache-path folders each get their view's cache and train on the same
// samples, with no rank waiting on a file; a rank whose build fails stops every rank at
// the end of its turn, named, instead of leaving the others waiting. Ranks run as
// threads of one process.
#include "trainer/training_data_turns.h"

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "data/indexed_dataset_builder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/util/in_process_world.h"
#include "tests/util/test_dirs.h"

namespace conveyor {
namespace {

using ::testing::HasSubstr;
using testing_util::FreshDir;
using testing_util::InProcessWorld;

// A dataset of 20 documents of 10-29 tokens, and a resolved config that reads it.
Config DataConfig(const std::string& dir) {
  auto builder = IndexedDatasetBuilder::Create(dir + "/corpus.bin", TokenDType::kUint16);
  EXPECT_TRUE(builder.ok()) << builder.status();
  for (int d = 0; d < 20; ++d) {
    std::vector<int32_t> tokens(10 + d, d + 1);
    EXPECT_TRUE((*builder)->AddDocument(tokens, std::vector<int32_t>{10 + d}).ok());
  }
  EXPECT_TRUE((*builder)->Finalize(dir + "/corpus.idx").ok());
  Config c;
  c.mutable_model()->set_seq_length(16);
  c.mutable_model()->set_vocab_size(512);
  c.mutable_training()->set_seed(1234);
  c.mutable_data()->add_data_path(dir + "/corpus");
  c.mutable_data()->set_split("1,0,0");
  return c;
}

int CacheSets(const std::string& folder) {
  int sets = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(folder, ec)) {
    sets += absl::EndsWith(entry.path().string(), "-description.txt");
  }
  return sets;
}

struct RankOutcome {
  absl::Status status;
  std::vector<int32_t> first_sample;
};

// Rank r builds with --data-cache-path caches[r], as LOCAL_RANK local_ranks[r] (default:
// every rank on one node).
std::vector<RankOutcome> BuildOnRanks(const Config& config, const std::vector<std::string>& caches,
                                      std::vector<int> local_ranks = {0, 1, 2}) {
  std::vector<RankOutcome> outcomes(caches.size());
  InProcessWorld world(int(caches.size()));
  world.Run([&](int rank, Communicator& comm) {
    Config mine = config;
    mine.mutable_data()->set_data_cache_path(caches[rank]);
    absl::StatusOr<DataSplits> data =
        BuildTrainingDataInTurns(mine, {40, 0, 0}, comm, local_ranks[rank]);
    outcomes[rank].status = data.status();
    if (data.ok()) outcomes[rank].first_sample = *data->train->Sample(0);
    return data.status();
  });
  return outcomes;
}

TEST(TrainingDataTurnsTest, RanksWithTheirOwnCacheFoldersEachBuildTheirs) {
  const std::string dir = FreshDir("turns_own");
  const Config config = DataConfig(dir);
  const std::vector<std::string> caches = {dir + "/cache0", dir + "/cache1", dir + "/cache2"};
  const std::vector<RankOutcome> outcomes = BuildOnRanks(config, caches);
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_TRUE(outcomes[rank].status.ok()) << rank << ": " << outcomes[rank].status;
    EXPECT_EQ(CacheSets(caches[rank]), 1) << caches[rank];
    EXPECT_EQ(outcomes[rank].first_sample, outcomes[0].first_sample);
  }
  EXPECT_FALSE(outcomes[0].first_sample.empty());
  // One folder for every rank: written once (by rank 0), loaded by the others.
  const std::vector<RankOutcome> shared =
      BuildOnRanks(config, std::vector<std::string>(3, dir + "/shared"));
  for (const RankOutcome& outcome : shared) EXPECT_TRUE(outcome.status.ok()) << outcome.status;
  EXPECT_EQ(CacheSets(dir + "/shared"), 1);
}

TEST(TrainingDataTurnsTest, ARankThatCannotBuildStopsEveryRankNamingIt) {
  const std::string dir = FreshDir("turns_failing");
  const Config config = DataConfig(dir);
  // Two nodes: rank 0, and ranks 1 and 2. Rank 1, its node's first, cannot create its
  // --data-cache-path: a file lies where a folder of its path belongs.
  ASSERT_TRUE(std::filesystem::create_directories(dir + "/cache1.d"));
  const std::string not_a_folder = dir + "/cache1.d/file";
  { std::ofstream(not_a_folder) << "x"; }
  const std::vector<RankOutcome> outcomes =
      BuildOnRanks(config, {dir + "/cache0", not_a_folder + "/cache", dir + "/cache2"}, {0, 0, 1});
  EXPECT_THAT(outcomes[1].status.message(),
              HasSubstr("--data-cache-path " + not_a_folder + "/cache: cannot create the folder"));
  for (int rank : {0, 2}) {
    // A refusal of input (exit 2) on every rank, as rank 1's own error is one.
    EXPECT_TRUE(absl::IsFailedPrecondition(outcomes[rank].status)) << outcomes[rank].status;
    EXPECT_THAT(outcomes[rank].status.message(),
                HasSubstr("stopping before training: rank(s) 1 could not build or load the "
                          "sample indices in its --data-cache-path (each node's first rank, "
                          "after rank 0)"));
  }
  EXPECT_EQ(CacheSets(dir + "/cache2"), 0);  // stopped before its turn
}

}  // namespace
}  // namespace conveyor
