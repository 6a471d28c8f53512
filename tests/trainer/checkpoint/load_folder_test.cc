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
