// Multi-token prediction's flags (--mtp-num-layers, --mtp-loss-scaling-factor): their
// rules, the model shape they give, Megatron's log line and metrics with the depths'
// losses, and Megatron's TFLOP/s formula with the depths' terms.
#include <cmath>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/config.pb.h"
#include "tests/trainer/config_fixtures.h"
#include "trainer/config/config_validation.h"
#include "trainer/config/resolved_config.h"
#include "trainer/planning/flops.h"
#include "trainer/planning/plan.h"
#include "trainer/reporting/training_log.h"

namespace conveyor {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;

Config Valid() {
  Config c = testing_util::SmallestValidConfig();
  c.mutable_model()->set_position_embedding_type("rope");
  c.mutable_model()->set_mtp_num_layers(2);
  return c;
}

TEST(MtpConfigTest, RulesNameTheFlags) {
  EXPECT_THAT(ValidateConfig(Valid(), 1), IsEmpty());
  Config c = Valid();
  c.mutable_model()->set_mtp_num_layers(-1);
  EXPECT_THAT(ValidateConfig(c, 1), ElementsAre(StartsWith("--mtp-num-layers -1 is negative")));
  c = Valid();
  c.mutable_model()->set_mtp_loss_scaling_factor(-0.5f);
  EXPECT_THAT(ValidateConfig(c, 1),
              ElementsAre(StartsWith("--mtp-loss-scaling-factor -0.5 must be a finite number")));
  c.mutable_model()->set_mtp_loss_scaling_factor(NAN);
  EXPECT_THAT(ValidateConfig(c, 1), ElementsAre(StartsWith("--mtp-loss-scaling-factor nan")));
  c = Valid();
  c.mutable_model()->set_position_embedding_type("learned_absolute");
  EXPECT_THAT(ValidateConfig(c, 1),
              ElementsAre(StartsWith("--mtp-num-layers with --position-embedding-type "
                                     "learned_absolute")));
  c = Valid();
  c.mutable_model()->set_window_size("4,0");
  EXPECT_THAT(ValidateConfig(c, 1), ElementsAre(StartsWith("--mtp-num-layers with --window-size")));
  // Refused on a GPU until it has trained on one.
  c = Valid();
  c.mutable_parallel()->set_device("cuda");
  EXPECT_THAT(ValidateConfig(c, 1),
              ElementsAre(AllOf(StartsWith("--mtp-num-layers 2 with --device cuda: multi-token "
                                           "prediction"),
                                HasSubstr("has never run on a GPU; run it with --device cpu, or "
                                          "use --mtp-num-layers 0"))));
  // Without depths the factor is not read, and learned positions are fine.
  c = Valid();
  c.mutable_model()->set_mtp_num_layers(0);
  c.mutable_model()->set_position_embedding_type("learned_absolute");
  c.mutable_model()->set_mtp_loss_scaling_factor(-1.0f);
  EXPECT_THAT(ValidateConfig(c, 1), IsEmpty());
}

TEST(MtpConfigTest, ModelShapeTakesTheDepthsAndTheirWeight) {
  Config c = Valid();
  c.mutable_model()->set_mtp_loss_scaling_factor(0.25f);
  const absl::StatusOr<Config> resolved = ResolveConfig(c, 1);
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  const absl::StatusOr<ResolvedConfig> r = ResolvedConfig::Resolve(*resolved, 1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->model_shape().mtp_layers, 2);
  EXPECT_EQ(r->model_shape().mtp_loss_scaling, 0.25f);
  EXPECT_EQ(Config().model().mtp_loss_scaling_factor(), 0.1f);  // Megatron's default
}

// Megatron's training_log: "mtp_<k> loss" after the lm loss (and the router's losses);
// the metrics file has mtp_<k>_loss.
TEST(MtpConfigTest, LogLineAndMetricsCarryEachDepthsLoss) {
  IntervalStats s;
  s.lm_loss = 2.5;
  s.mtp_losses = {3.25, 4.125};
  const std::string line = FormatLogLine(s);
  EXPECT_THAT(line, HasSubstr("| lm loss: 2.500000E+00 | mtp_1 loss: 3.250000E+00 | "
                              "mtp_2 loss: 4.125000E+00 | grad norm:"));
  EXPECT_THAT(FormatMetricsJson(s),
              HasSubstr("\"mtp_1_loss\": 3.25, \"mtp_2_loss\": 4.125, \"skipped_iterations\""));
  EXPECT_EQ(MtpLossName(3), "mtp_3 loss");
}

// --dry-run names the depths, and a mixture of experts' line counts the depths' MoE
// layers among its layers, as Megatron's MoE figures do.
TEST(MtpConfigTest, DryRunNamesTheDepths) {
  Config c = Valid();
  c.mutable_model()->set_num_experts(4);
  c.mutable_model()->set_disable_bias_linear(true);
  const absl::StatusOr<Config> resolved = ResolveConfig(c, 1);
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  const absl::StatusOr<ResolvedConfig> r = ResolvedConfig::Resolve(*resolved, 1);
  ASSERT_TRUE(r.ok()) << r.status();
  const absl::StatusOr<std::string> plan = FormatPlan(*r);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(*plan, HasSubstr("plan: multi-token prediction: 2 depths (layers 2 to 3, "
                               "mixture-of-experts like the last) on pipeline rank 0; loss = "
                               "lm loss + 0.1 / 2 x (the depths' losses)\n"));
  EXPECT_THAT(*plan, HasSubstr(", in 4 of 4 layers: "));
}

// One layer and one depth, by Megatron's num_floating_point_operations worked out by hand:
// 3 passes x 2 FLOPs x tokens x (each of the L + D layers' attention and MLP, D x (3h + 2h^2)
// for the depths' norms and projection, and (1 + D) output layers of h x V).
TEST(MtpConfigTest, FlopsCountTheDepths) {
  ModelShape s;
  s.num_layers = 1;
  s.hidden = 8;
  s.heads = 4;
  s.query_groups = 4;
  s.head_dim = 2;
  s.ffn_hidden = 16;
  s.seq = 8;
  s.padded_vocab = 16;
  s.mtp_layers = 1;
  const double tokens = 8;
  // Per layer 12 s h^2 ((1 + 1 + s/h) + f/h) = 12 * 8 * 64 * (3 + 2).
  const double layers = 2 * 12.0 * tokens * 64 * 5;
  const double logits = 6.0 * tokens * 8 * 16 * 2;
  const double depth = 6.0 * tokens * (3 * 8 + 2 * 64);
  EXPECT_DOUBLE_EQ(MegatronFlopsPerIteration(s, 1), layers + logits + depth);
}

}  // namespace
}  // namespace conveyor
