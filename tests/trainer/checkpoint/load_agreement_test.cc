// The ranks' agreement before training (load_agreement.h): a rank that failed makes
// every rank stop, and ranks that loaded different checkpoints (a --load folder per
// node, a stale view of shared storage) are refused on every rank with what each
// loaded and the fix, instead of training apart. Ranks run as threads, so each case
// also shows that the collectives meet whatever each rank's outcome.
#include "trainer/checkpoint/load_agreement.h"

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/exit_code.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "parallel/self_communicator.h"
#include "proto/checkpoint.pb.h"
#include "tests/util/in_process_world.h"
#include "tests/util/test_dirs.h"
#include "trainer/checkpoint/envelope.h"
#include "trainer/checkpoint/file_io.h"
#include "trainer/checkpoint/format.h"

namespace conveyor {
namespace {

using ::testing::AllOf;
using ::testing::Each;
using ::testing::HasSubstr;
using ::testing::Not;
using testing_util::InProcessWorld;

// Each rank's verdict when rank r's load gave `loaded[r]`, its --load `load_dirs[r]`.
std::vector<absl::Status> Agree(const std::vector<absl::StatusOr<LoadedCheckpointId>>& loaded,
                                const std::vector<std::string>& load_dirs) {
  InProcessWorld world(int(loaded.size()));
  return world.Run([&](int rank, Communicator& comm) {
    return AgreeOnLoadedCheckpoint(comm, loaded[rank], load_dirs[rank]);
  });
}

LoadedCheckpointId At(int64_t iteration, int64_t consumed_samples) {
  return {iteration, consumed_samples};
}

const LoadedCheckpointId kNone{};

TEST(LoadAgreementTest, RanksThatLoadedTheSameCheckpointAgree) {
  EXPECT_THAT(Agree({At(20, 160), At(20, 160), At(20, 160)}, {"ckpt", "ckpt", "ckpt"}),
              Each(absl::OkStatus()));
  EXPECT_THAT(Agree({kNone, kNone}, {"ckpt", "ckpt"}), Each(absl::OkStatus()));
  SelfCommunicator alone;
  EXPECT_TRUE(AgreeOnLoadedCheckpoint(alone, At(5, 40), "ckpt").ok());
}

TEST(LoadAgreementTest, OneRankFromScratchAnotherResumingIsRefusedOnEveryRank) {
  // Rank 1's --load is its node's own, empty folder.
  const std::vector<absl::Status> verdicts =
      Agree({At(20, 160), kNone}, {"/shared/ckpt", "/local/ckpt"});
  for (int rank = 0; rank < 2; ++rank) {
    const absl::Status& st = verdicts[rank];
    EXPECT_TRUE(absl::IsFailedPrecondition(st)) << "rank " << rank << ": " << st;
    EXPECT_THAT(st.message(),
                AllOf(HasSubstr("the ranks loaded different checkpoints (rank 0: iteration 20 "
                                "(160 samples consumed); rank 1: no checkpoint (starting from "
                                "iteration 0))"),
                      HasSubstr("nothing was trained or changed"),
                      HasSubstr("Every rank must see the same --load folder")));
  }
  EXPECT_THAT(verdicts[0].message(), HasSubstr("this rank's is /shared/ckpt"));
  EXPECT_THAT(verdicts[1].message(), HasSubstr("this rank's is /local/ckpt"));
}

TEST(LoadAgreementTest, GroupsRanksByWhatTheyLoaded) {
  // A stale view: ranks 2 and 3 see the latest file of an older save.
  const std::vector<absl::Status> verdicts =
      Agree({At(20, 160), At(20, 160), At(15, 120), At(15, 120), At(20, 160)},
            std::vector<std::string>(5, "ckpt"));
  for (const absl::Status& st : verdicts) {
    EXPECT_TRUE(absl::IsFailedPrecondition(st)) << st;
    EXPECT_THAT(st.message(), HasSubstr("(ranks 0,1,4: iteration 20 (160 samples consumed); "
                                        "ranks 2,3: iteration 15 (120 samples consumed))"));
  }
}

TEST(LoadAgreementTest, TheSameIterationWithOtherConsumedSamplesIsRefused) {
  // Two runs' folders, both at iteration 20, trained with other batch sizes.
  const std::vector<absl::Status> verdicts = Agree({At(20, 160), At(20, 320)}, {"a", "b"});
  for (const absl::Status& st : verdicts) {
    EXPECT_TRUE(absl::IsFailedPrecondition(st)) << st;
    EXPECT_THAT(st.message(), HasSubstr("rank 0: iteration 20 (160 samples consumed); rank 1: "
                                        "iteration 20 (320 samples consumed)"));
  }
}

// A --load folder holding only iteration `iteration`'s manifest, of a run that saved
// `tensor` (two runs' checkpoints differ in their tensors' records).
std::string FolderWithManifest(const std::string& name, int64_t iteration,
                               const std::string& tensor) {
  const std::string dir = testing_util::FreshDir(name);
  const std::string iteration_dir = dir + "/" + IterationDirName(iteration);
  EXPECT_TRUE(MakeDirs(iteration_dir).ok());
  Manifest manifest;
  manifest.set_iteration(iteration);
  manifest.set_consumed_samples(iteration * 8);
  manifest.add_tensors()->set_name(tensor);
  EXPECT_TRUE(WriteEnvelopeFile(iteration_dir + "/" + kManifestFileName, manifest).ok());
  return dir;
}

// Node-local copies of two runs' checkpoints of one iteration: the same iteration and
// samples, other weights. Copies of one checkpoint at other paths agree.
TEST(LoadAgreementTest, TwoRunsCheckpointsOfOneIterationAreRefusedByTheirManifests) {
  const std::string run_a = FolderWithManifest("run_a", 20, "w");
  const std::string copy_of_a = FolderWithManifest("copy_of_a", 20, "w");
  const std::string run_b = FolderWithManifest("run_b", 20, "w2");
  EXPECT_THAT(Agree({At(20, 160), At(20, 160)}, {run_a, copy_of_a}), Each(absl::OkStatus()));
  const std::vector<absl::Status> verdicts =
      Agree({At(20, 160), At(20, 160), At(20, 160)}, {run_a, copy_of_a, run_b});
  for (int rank = 0; rank < 3; ++rank) {
    const absl::Status& st = verdicts[rank];
    EXPECT_TRUE(absl::IsFailedPrecondition(st)) << st;
    EXPECT_THAT(
        std::string(st.message()),
        AllOf(::testing::ContainsRegex(
                  "the ranks loaded different checkpoints \\(ranks 0,1: iteration 20 "
                  "\\(160 samples consumed, manifest CRC32C [0-9a-f]{8}\\); rank 2: "
                  "iteration 20 \\(160 samples consumed, manifest CRC32C [0-9a-f]{8}\\)\\)"),
              HasSubstr("Every rank must see the same --load folder")));
  }
  EXPECT_THAT(verdicts[2].message(), HasSubstr("this rank's is " + run_b + " (it loaded " + run_b +
                                               "/iter_0000020/manifest.pb)"));
}

TEST(LoadAgreementTest, ARankWithoutLoadIsNamed) {
  const std::vector<absl::Status> verdicts = Agree({At(20, 160), kNone}, {"ckpt", ""});
  EXPECT_THAT(verdicts[1].message(), HasSubstr("this rank has no --load"));
}

TEST(LoadAgreementTest, AFailedRankStopsEveryRankAndKeepsItsOwnError) {
  const absl::Status damaged = absl::DataLossError("checksum mismatch in ckpt/x.bin");
  const std::vector<absl::Status> verdicts = Agree({At(20, 160), damaged, kNone}, {"c", "c", "c"});
  EXPECT_EQ(verdicts[1], damaged);
  for (int rank : {0, 2}) {
    // A damaged checkpoint is input to change (exit 2, base/exit_code.h): the ranks that
    // stop for it exit alike, whichever the launcher sees first.
    EXPECT_TRUE(absl::IsFailedPrecondition(verdicts[rank])) << verdicts[rank];
    EXPECT_THAT(verdicts[rank].message(),
                HasSubstr("rank(s) 1 could not load --load (their errors say why)"));
    // A failure is reported as such, not as a disagreement.
    EXPECT_THAT(verdicts[rank].message(), Not(HasSubstr("different checkpoints")));
  }
}

TEST(AgreeAcrossRanksTest, EveryRankLearnsWhichRanksFailed) {
  InProcessWorld world(4);
  const std::vector<absl::Status> verdicts = world.Run([](int rank, Communicator& comm) {
    const absl::Status mine = rank == 1 || rank == 2
                                  ? absl::FailedPreconditionError("--save cannot hold checkpoints")
                                  : absl::OkStatus();
    return AgreeAcrossRanks(comm, mine, "prepare --save");
  });
  EXPECT_THAT(verdicts[1].message(), HasSubstr("--save cannot hold checkpoints"));
  EXPECT_THAT(verdicts[2].message(), HasSubstr("--save cannot hold checkpoints"));
  for (int rank : {0, 3}) {
    EXPECT_EQ(ExitCodeFor(verdicts[rank]), 2) << verdicts[rank];  // as ranks 1 and 2's
    EXPECT_THAT(verdicts[rank].message(), HasSubstr("rank(s) 1,2 could not prepare --save"));
  }
  // A failure that is not the input's (an I/O error) stops the others with exit 1.
  InProcessWorld io(2);
  const std::vector<absl::Status> io_verdicts = io.Run([](int rank, Communicator& comm) {
    const absl::Status mine =
        rank == 1 ? absl::UnavailableError("cannot write the probe: Input/output error")
                  : absl::OkStatus();
    return AgreeAcrossRanks(comm, mine, "prepare --save");
  });
  EXPECT_TRUE(absl::IsAborted(io_verdicts[0])) << io_verdicts[0];
  EXPECT_EQ(ExitCodeFor(io_verdicts[0]), 1);
  InProcessWorld healthy(2);
  EXPECT_THAT(healthy.Run([](int, Communicator& comm) {
    return AgreeAcrossRanks(comm, absl::OkStatus(), "prepare --save");
  }),
              Each(absl::OkStatus()));
}

}  // namespace
}  // namespace conveyor
