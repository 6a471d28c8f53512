// trainer/config/size_limits.h: every size a flag asks for is checked against its limit before
// anything is built for it, all at once and alone (the other rules build per-layer and
// per-step structures), with the flag, the value, the limit and the fix.
#include "trainer/config/size_limits.h"

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "trainer/config/config_validation.h"
#include "trainer/config/flags.h"

namespace conveyor {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

Config Parsed(std::vector<std::string> args) {
  args.insert(args.begin(), {"--mock-data", "--vocab-size", "512"});
  absl::StatusOr<Config> config = ParseFlags(args);
  EXPECT_TRUE(config.ok()) << config.status();
  return config.ok() ? *config : Config();
}

TEST(SizeLimitsTest, TheMessageNamesTheSourceTheValueTheLimitAndTheFix) {
  EXPECT_EQ(SizeLimitProblem("--num-layers", 16384, kMaxLayers), std::nullopt);
  EXPECT_EQ(*SizeLimitProblem("--num-layers", 100000000, kMaxLayers),
            "--num-layers 100000000 is more than 16384, the largest Conveyor accepts (each "
            "layer is built as its own objects); set --num-layers to at most 16384");
  // trainer/hf names a file's key the same way.
  EXPECT_EQ(*SizeLimitProblem("config.json's num_hidden_layers", 20000, kMaxLayers,
                              "; this is not a model Conveyor can build"),
            "config.json's num_hidden_layers 20000 is more than 16384, the largest Conveyor "
            "accepts (each layer is built as its own objects); this is not a model Conveyor "
            "can build");
}

TEST(SizeLimitsTest, ValidationReportsEverySizeAndNothingElse) {
  // --adam-beta1 1.5 is wrong too, but the sizes come alone: the other rules would
  // build 1e8 layers' structures.
  const std::vector<std::string> problems = ValidateConfig(
      Parsed({"--num-layers", "100000000", "--seq-length", "100000000", "--adam-beta1", "1.5"}), 1);
  EXPECT_THAT(problems, ElementsAre(HasSubstr("--num-layers 100000000 is more than 16384"),
                                    HasSubstr("--seq-length 100000000 is more than 16777216")));
  EXPECT_THAT(
      ValidateConfig(
          Parsed({"--num-layers", "16384", "--hidden-size", "8", "--num-attention-heads", "1"}), 1),
      IsEmpty());
}

TEST(SizeLimitsTest, ProductsOfSizesHaveTheirOwnLimits) {
  EXPECT_THAT(
      SizeLimitProblems(
          Parsed({"--num-layers", "2048", "--num-experts", "1024", "--disable-bias-linear"}), 1),
      ElementsAre("the experts of all layers, --num-layers 2048 x --num-experts 1024 = "
                  "2097152 is more than 1048576, the largest Conveyor accepts (each "
                  "layer's experts are built as objects); use fewer layers or experts"));
  // Each size within its limit, the model beyond 2^48 parameters.
  EXPECT_THAT(SizeLimitProblems(Parsed({"--num-layers", "16384", "--hidden-size", "1048576",
                                        "--num-attention-heads", "16"}),
                                1),
              ElementsAre(HasSubstr("the model's parameters (estimated from --num-layers")));
  EXPECT_GT(
      EstimatedParameters(Parsed({"--num-layers", "16384", "--hidden-size", "1048576"}).model()),
      static_cast<double>(kMaxParameters.max));
}

// Training lists a step's actions (PP x V x M); --dry-run plans any global batch.
TEST(SizeLimitsTest, TheMicroBatchesOfATrainingStepAreBounded) {
  const std::vector<std::string> huge = {"--global-batch-size",
                                         "200000000",
                                         "--micro-batch-size",
                                         "1",
                                         "--pipeline-model-parallel-size",
                                         "2",
                                         "--nproc-per-node",
                                         "2"};
  EXPECT_THAT(SizeLimitProblems(Parsed(huge), 1),
              ElementsAre("a training step's forward and backward actions, PP 2 x V 1 x M "
                          "200000000 micro-batches (--global-batch-size / (--micro-batch-size x "
                          "DP)) = 400000000 is more than 4194304, the largest Conveyor accepts "
                          "(the schedule of a step lists every micro-batch's forward and backward "
                          "of every stage); use a smaller --global-batch-size or a larger "
                          "--micro-batch-size (--dry-run plans any size)"));
  std::vector<std::string> dry_run = huge;
  dry_run.push_back("--dry-run");
  EXPECT_THAT(SizeLimitProblems(Parsed(dry_run), 1), IsEmpty());
  EXPECT_TRUE(ResolveConfig(Parsed(dry_run), 2).ok());
}

// The schedule's rules are checked on a prefix with M's remainder modulo P, and say so.
TEST(SizeLimitsTest, ScheduleRulesOfAHugeGlobalBatchNeedNoLists) {
  const absl::StatusOr<Config> odd = ResolveConfig(
      Parsed({"--global-batch-size", "200000001", "--micro-batch-size", "1",
              "--pipeline-model-parallel-size", "2", "--nproc-per-node", "2",
              "--num-virtual-stages-per-pipeline-rank", "2", "--num-layers", "4", "--dry-run"}),
      2);
  ASSERT_FALSE(odd.ok());
  EXPECT_THAT(odd.status().message(),
              HasSubstr("(checked on 1023 micro-batches, which have the remainder of M = "
                        "200000001 modulo P)"));
}

// The ramp is planned and checked once per batch size.
TEST(SizeLimitsTest, TheRampHasAtMostAMillionIncrements) {
  const std::vector<std::string> ramp = {"--train-samples",
                                         "1000000",
                                         "--global-batch-size",
                                         "2097154",
                                         "--rampup-batch-size",
                                         "2",
                                         "2"};
  std::vector<std::string> fine = ramp, many = ramp;
  fine.push_back("1000");
  many.push_back("1000");
  many[3] = "2097156";
  EXPECT_THAT(SizeLimitProblems(Parsed(fine), 1), IsEmpty());  // 2^20 increments
  EXPECT_THAT(SizeLimitProblems(Parsed(many), 1),
              ElementsAre("the increments of --rampup-batch-size 2 2 towards "
                          "--global-batch-size 2097156, (GLOBAL - START) / INCREMENT = 1048577 is "
                          "more than 1048576, the largest Conveyor accepts (the ramp is planned "
                          "once per batch size); choose an INCREMENT of at least 3"));
}

TEST(SizeLimitsTest, SampleCountsStayExactInDouble) {
  EXPECT_THAT(SizeLimitProblems(Parsed({"--train-samples", "9007199254740993"}), 1),
              ElementsAre(HasSubstr("--train-samples 9007199254740993 is more than "
                                    "9007199254740992")));
}

}  // namespace
}  // namespace conveyor
