// What a --load folder holds (SurveyCheckpointFolder), which other iteration a
// message may suggest (NewestOpenableIteration), and the --save probe
// (ProbeSaveFolder): the pieces the trainer uses to refuse starting from scratch over
// existing checkpoints and to reject an unwritable --save before training.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/trainer/checkpoint/checkpoint_test_util.h"
#include "tests/util/test_dirs.h"
#include "trainer/checkpoint/checkpoint_reader.h"
#include "trainer/checkpoint/checkpoint_writer.h"
#include "trainer/checkpoint/file_io.h"
#include "trainer/checkpoint/format.h"

namespace conveyor {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing_util::FreshDir;

absl::Status SaveAt(const std::string& dir, int64_t iteration, int64_t elements = 16) {
  return testing_util::SaveOneTensorCheckpoint(dir, iteration, elements);
}

TEST(SurveyCheckpointFolderTest, AMissingFolderHoldsNoCheckpoint) {
  const std::string dir = FreshDir("survey_missing") + "/absent";
  absl::StatusOr<CheckpointFolderSurvey> survey = SurveyCheckpointFolder(dir);
  ASSERT_TRUE(survey.ok()) << survey.status();
  EXPECT_FALSE(survey->exists);
  EXPECT_TRUE(survey->holds_no_checkpoint());
  EXPECT_FALSE(PathExists(dir));  // looking creates nothing
}

TEST(SurveyCheckpointFolderTest, LeftoversOfInterruptedSavesAreNoCheckpoint) {
  const std::string dir = FreshDir("survey_leftovers");
  ASSERT_TRUE(MakeDirs(dir + "/iter_0000005.tmp-0123456789ab").ok());
  ASSERT_TRUE(MakeDirs(dir + "/iter_notanumber").ok());
  ASSERT_TRUE(WriteFileDurably(dir + "/notes.txt", "hello\n").ok());
  absl::StatusOr<CheckpointFolderSurvey> survey = SurveyCheckpointFolder(dir);
  ASSERT_TRUE(survey.ok()) << survey.status();
  EXPECT_TRUE(survey->exists);
  EXPECT_TRUE(survey->holds_no_checkpoint());
}

TEST(SurveyCheckpointFolderTest, ListsCommittedIterationsAndTheLatestFile) {
  const std::string dir = FreshDir("survey_committed");
  ASSERT_TRUE(SaveAt(dir, 10).ok());
  ASSERT_TRUE(SaveAt(dir, 5).ok());
  ASSERT_TRUE(MakeDirs(dir + "/iter_0000020.tmp-0123456789ab").ok());
  absl::StatusOr<CheckpointFolderSurvey> survey = SurveyCheckpointFolder(dir);
  ASSERT_TRUE(survey.ok()) << survey.status();
  EXPECT_TRUE(survey->has_latest_file);
  EXPECT_THAT(survey->committed_iterations, ElementsAre(5, 10));
  EXPECT_FALSE(survey->holds_no_checkpoint());

  // A committed folder alone (latest file deleted) is still a checkpoint.
  ASSERT_TRUE(RemoveFile(dir + "/" + kLatestFileName).ok());
  survey = SurveyCheckpointFolder(dir);
  ASSERT_TRUE(survey.ok()) << survey.status();
  EXPECT_FALSE(survey->has_latest_file);
  EXPECT_FALSE(survey->holds_no_checkpoint());
}

TEST(SurveyCheckpointFolderTest, AFileIsNotAFolderOfCheckpoints) {
  const std::string file = FreshDir("survey_file") + "/plain";
  ASSERT_TRUE(WriteFileDurably(file, "x").ok());
  const absl::Status status = SurveyCheckpointFolder(file).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr(file + " is a file, not a folder"));
}

// Megatron-LM's layouts as megatron/training/checkpointing.py writes them: the latest
// file (the iteration, or "release") beside iter_NNNNNNN (or release) folders holding
// mp_rank_TT[_PPP]/model_optim_rng.pt (torch) or *.distcp with .metadata (torch_dist).
void WriteMegatronFolder(const std::string& dir, const std::string& latest,
                         const std::string& folder, const std::vector<std::string>& files) {
  ASSERT_TRUE(MakeDirs(dir + "/" + folder).ok());
  ASSERT_TRUE(WriteFileDurably(dir + "/" + std::string(kLatestFileName), latest).ok());
  for (const std::string& file : files) {
    const std::string path = dir + "/" + folder + "/" + file;
    ASSERT_TRUE(MakeDirs(path.substr(0, path.rfind('/'))).ok());
    ASSERT_TRUE(WriteFileDurably(path, "not Conveyor's").ok());
  }
}

TEST(SurveyCheckpointFolderTest, MegatronsCheckpointsAreNamedWithTheRouteThatExists) {
  const std::string torch = FreshDir("survey_megatron_torch");
  WriteMegatronFolder(torch, "100", "iter_0000100",
                      {"mp_rank_00_000/model_optim_rng.pt", "mp_rank_00_001/model_optim_rng.pt"});
  absl::StatusOr<CheckpointFolderSurvey> survey = SurveyCheckpointFolder(torch);
  EXPECT_EQ(survey.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(survey.status().message(),
            torch + " holds a checkpoint written by Megatron-LM (Megatron-LM's torch layout: "
                    "iter_0000100 holds mp_rank_00_000/model_optim_rng.pt), a format Conveyor "
                    "neither reads nor writes: to train from its weights, convert it to a Hugging "
                    "Face model folder (Megatron Bridge's export, "
                    "examples/conversion/convert_checkpoints.py) and pass that folder to "
                    "--load-hf");

  const std::string dist = FreshDir("survey_megatron_torch_dist");
  WriteMegatronFolder(dist, "20", "iter_0000020",
                      {"__0_0.distcp", "__1_0.distcp", ".metadata", "common.pt", "metadata.json"});
  survey = SurveyCheckpointFolder(dist);
  EXPECT_EQ(survey.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(survey.status().message(),
              HasSubstr("(Megatron-LM's torch_dist layout: iter_0000020 holds __0_0.distcp and "
                        ".metadata)"));

  const std::string release = FreshDir("survey_megatron_release");
  WriteMegatronFolder(release, "release", "release", {"mp_rank_00/model_optim_rng.pt"});
  survey = SurveyCheckpointFolder(release);
  EXPECT_THAT(survey.status().message(),
              HasSubstr("(Megatron-LM's torch layout: release holds mp_rank_00/model_optim_rng.pt)"));
}

TEST(SurveyCheckpointFolderTest, ConveyorsOwnCheckpointIsNotMegatrons) {
  const std::string dir = FreshDir("survey_conveyor_not_megatron");
  ASSERT_TRUE(SaveAt(dir, 7).ok());
  absl::StatusOr<CheckpointFolderSurvey> survey = SurveyCheckpointFolder(dir);
  ASSERT_TRUE(survey.ok()) << survey.status();
  EXPECT_THAT(survey->committed_iterations, ElementsAre(7));
}

TEST(NewestOpenableIterationTest, SkipsTheFailingIterationAndDamagedOnes) {
  const std::string dir = FreshDir("newest_openable");
  for (int64_t it : {5, 10, 15}) ASSERT_TRUE(SaveAt(dir, it).ok());
  absl::StatusOr<CheckpointFolderSurvey> survey = SurveyCheckpointFolder(dir);
  ASSERT_TRUE(survey.ok());
  EXPECT_EQ(NewestOpenableIteration(dir, *survey, std::nullopt, 3), 15);
  EXPECT_EQ(NewestOpenableIteration(dir, *survey, 15, 3), 10);
  ASSERT_TRUE(RemoveFile(dir + "/iter_0000010/rank_00000.bin").ok());
  EXPECT_EQ(NewestOpenableIteration(dir, *survey, 15, 3), 5);
  ASSERT_TRUE(RemoveFile(dir + "/iter_0000005/manifest.pb").ok());
  EXPECT_EQ(NewestOpenableIteration(dir, *survey, 15, 3), std::nullopt);
}

TEST(NewestOpenableIterationTest, TriesOnlyTheNewestFew) {
  // Every rank may look at once, on shared storage: older checkpoints are not opened.
  const std::string dir = FreshDir("newest_openable_few");
  for (int64_t it : {5, 10, 15, 20}) ASSERT_TRUE(SaveAt(dir, it).ok());
  absl::StatusOr<CheckpointFolderSurvey> survey = SurveyCheckpointFolder(dir);
  ASSERT_TRUE(survey.ok());
  ASSERT_TRUE(RemoveFile(dir + "/iter_0000015/manifest.pb").ok());
  ASSERT_TRUE(RemoveFile(dir + "/iter_0000010/manifest.pb").ok());
  // Excluding 20, the two newest others are damaged: 5 is the third try.
  EXPECT_EQ(NewestOpenableIteration(dir, *survey, 20, 3), 5);
  EXPECT_EQ(NewestOpenableIteration(dir, *survey, 20, 2), std::nullopt);
  // The excluded iteration is no try.
  EXPECT_EQ(NewestOpenableIteration(dir, *survey, std::nullopt, 3), 20);
  ASSERT_TRUE(RemoveFile(dir + "/iter_0000020/manifest.pb").ok());
  EXPECT_EQ(NewestOpenableIteration(dir, *survey, std::nullopt, 3), std::nullopt);
  EXPECT_EQ(NewestOpenableIteration(dir, *survey, std::nullopt, 4), 5);
}

TEST(ProbeSaveFolderTest, CreatesAMissingFolderAndLeavesNoProbeBehind) {
  const std::string dir = FreshDir("probe_ok") + "/a/b";
  ASSERT_TRUE(ProbeSaveFolder(dir, 3).ok());
  EXPECT_TRUE(IsDirectory(dir));
  absl::StatusOr<std::vector<std::string>> names = ListDir(dir);
  ASSERT_TRUE(names.ok());
  EXPECT_TRUE(names->empty()) << names->front();
  // Again, in the folder that exists now.
  EXPECT_TRUE(ProbeSaveFolder(dir, 3).ok());
}

TEST(ProbeSaveFolderTest, AFileOrAPathUnderAFileIsRefused) {
  const std::string file = FreshDir("probe_file") + "/plain";
  ASSERT_TRUE(WriteFileDurably(file, "x").ok());
  absl::Status status = ProbeSaveFolder(file, 0);
  EXPECT_TRUE(absl::IsFailedPrecondition(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr(file + " is a file, not a folder"));

  status = ProbeSaveFolder(file + "/sub", 0);
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("cannot create folder " + file + "/sub"));
  EXPECT_EQ(*ReadSmallFile(file), "x");
}

}  // namespace
}  // namespace conveyor
