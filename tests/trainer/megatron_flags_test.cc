// Megatron flags with no field here: the no-ops are dropped and listed, the
// math-changing ones refused with their reason (trainer/megatron_flags_not_here.h).
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/config.pb.h"
#include "trainer/flags.h"
#include "trainer/megatron_flags_not_here.h"

namespace conveyor {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST(MegatronNoOpFlagsTest, DroppedWithTheirValuesAndListed) {
  const MegatronNoOpSplit split = SplitMegatronNoOpFlags(
      {"--num-layers", "4", "--no-masked-softmax-fusion", "--transformer-impl", "local",
       "--attention_backend=auto", "--num-workers", "2", "--use-mcore-models", "--lr", "1e-3",
       "--distributed-backend", "nccl", "--dataloader-type", "single"});
  EXPECT_THAT(split.kept, ElementsAre("--num-layers", "4", "--lr", "1e-3"));
  EXPECT_THAT(split.ignored,
              ElementsAre("--no-masked-softmax-fusion", "--transformer-impl local",
                          "--attention_backend=auto", "--num-workers 2", "--use-mcore-models",
                          "--distributed-backend nccl", "--dataloader-type single"));
}

TEST(MegatronNoOpFlagsTest, AStoreTrueNoOpTakesNoValue) {
  // "--manual-gc" is a switch: the next word is not its value (a stray stays stray).
  const MegatronNoOpSplit split = SplitMegatronNoOpFlags({"--manual-gc", "5", "--bf16"});
  EXPECT_THAT(split.kept, ElementsAre("5", "--bf16"));
  EXPECT_THAT(split.ignored, ElementsAre("--manual-gc"));
}

TEST(MegatronNoOpFlagsTest, ANoOpAtOneValueOnlyIsRefusedAtOthers) {
  const MegatronNoOpSplit split =
      SplitMegatronNoOpFlags({"--dataloader-type=single", "--dataloader-type", "cyclic"});
  EXPECT_THAT(split.kept, ElementsAre("--dataloader-type", "cyclic"));
  EXPECT_THAT(split.ignored, ElementsAre("--dataloader-type=single"));
  const absl::StatusOr<Config> parsed = ParseFlags(split.kept);
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(parsed.status().message(),
              HasSubstr("Megatron's --dataloader-type has no counterpart here"));
}

TEST(MegatronNoOpFlagsTest, ParseFlagsAcceptsThemAndReportsThem) {
  std::vector<std::string> ignored;
  const absl::StatusOr<Config> parsed =
      ParseFlags({"--wandb-project", "p", "--num-layers", "3", "--log-throughput",
                  "--accumulate-allreduce-grads-in-fp32", "--attention-softmax-in-fp32"},
                 &ignored);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->model().num_layers(), 3);
  EXPECT_THAT(ignored,
              ElementsAre("--wandb-project p", "--log-throughput",
                          "--accumulate-allreduce-grads-in-fp32", "--attention-softmax-in-fp32"));
  EXPECT_EQ(MegatronNoOpWarning(ignored),
            "warning: Megatron flags that change nothing here were ignored (README: Megatron "
            "flags): --wandb-project p, --log-throughput, "
            "--accumulate-allreduce-grads-in-fp32, --attention-softmax-in-fp32");
  std::vector<std::string> none;
  ASSERT_TRUE(ParseFlags({"--num-layers", "3"}, &none).ok());
  EXPECT_THAT(none, IsEmpty());
}

TEST(MegatronNoOpFlagsTest, TheIssuesNoOpsHaveReasons) {
  for (const char* flag :
       {"--no-masked-softmax-fusion", "--no-bias-gelu-fusion", "--no-bias-dropout-fusion",
        "--no-bias-swiglu-fusion", "--no-gradient-accumulation-fusion", "--no-persist-layer-norm",
        "--no-rope-fusion", "--cross-entropy-loss-fusion", "--use-mcore-models",
        "--transformer-impl", "--attention-backend", "--num-workers", "--distributed-backend",
        "--attention-softmax-in-fp32", "--accumulate-allreduce-grads-in-fp32",
        "--log-throughput", "--manual-gc", "--ckpt-format"}) {
    const std::optional<std::string> reason = MegatronNoOpReason(flag);
    ASSERT_TRUE(reason.has_value()) << flag;
    EXPECT_FALSE(reason->empty()) << flag;
  }
  EXPECT_EQ(MegatronNoOpReason("--eod-mask-loss"), std::nullopt);
  EXPECT_THAT(*MegatronFlagNotHere("--use-rope-scaling"), HasSubstr("not implemented"));
  EXPECT_EQ(MegatronNoOpReason("--num-layers"), std::nullopt);
}

// A flag that became a real field must leave both tables: a no-op entry would drop
// it silently before the parser saw it, a refusal would never be reached.
TEST(MegatronNoOpFlagsTest, NoFieldIsAlsoANoOpOrARefusal) {
  for (const FlagField& f : AllFlagFields()) {
    const std::string flag = FlagName(*f.field);
    EXPECT_EQ(MegatronNoOpReason(flag), std::nullopt) << flag;
    EXPECT_EQ(MegatronFlagNotHere(flag), std::nullopt) << flag;
  }
}

}  // namespace
}  // namespace conveyor
