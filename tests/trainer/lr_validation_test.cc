// The rules of --lr-decay-style WSD and --decoupled-lr, through ValidateConfig.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/config.pb.h"
#include "tests/trainer/config_fixtures.h"
#include "trainer/config/config_validation.h"

namespace conveyor {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;
using testing_util::SmallestValidConfig;

TEST(LrValidationTest, WsdNeedsItsAnnealLengthInTheRunsUnit) {
  Config c = SmallestValidConfig();
  c.mutable_optimizer()->set_lr_decay_style("WSD");
  EXPECT_THAT(ValidateConfig(c, 1),
              ElementsAre(AllOf(StartsWith("--lr-decay-style WSD needs --lr-wsd-decay-iters N"),
                                HasSubstr("Megatron has no default"))));
  c.mutable_optimizer()->set_lr_wsd_decay_iters(20);
  EXPECT_THAT(ValidateConfig(c, 1), IsEmpty());
  c.mutable_optimizer()->set_lr_wsd_decay_iters(101);  // --train-iters 100
  EXPECT_THAT(ValidateConfig(c, 1),
              ElementsAre(StartsWith("--lr-wsd-decay-iters 101 exceeds --lr-decay-iters (= the "
                                     "run's length) 100")));
  c.mutable_optimizer()->set_lr_wsd_decay_samples(64);
  c.mutable_optimizer()->set_lr_wsd_decay_iters(0);
  EXPECT_THAT(ValidateConfig(c, 1),
              ElementsAre(StartsWith("--lr-wsd-decay-samples needs --train-samples"),
                          StartsWith("--lr-decay-style WSD needs --lr-wsd-decay-iters")));
  c.mutable_training()->set_train_iters(0);
  c.mutable_training()->set_train_samples(640);
  EXPECT_THAT(ValidateConfig(c, 1), IsEmpty());
  c.mutable_optimizer()->set_lr_wsd_decay_iters(3);
  EXPECT_THAT(ValidateConfig(c, 1),
              ElementsAre(StartsWith("--lr-wsd-decay-iters counts iterations")));
}

TEST(LrValidationTest, WsdStyleIsOneOfMegatrons) {
  Config c = SmallestValidConfig();
  c.mutable_optimizer()->set_lr_wsd_decay_style("sqrt");
  EXPECT_THAT(ValidateConfig(c, 1),
              ElementsAre(AllOf(StartsWith("--lr-wsd-decay-style 'sqrt' is not one of"),
                                HasSubstr("minus_sqrt"))));
}

TEST(LrValidationTest, DecoupledRatesDecayDownward) {
  Config c = SmallestValidConfig();
  c.mutable_optimizer()->set_decoupled_min_lr(1e-5f);
  EXPECT_THAT(ValidateConfig(c, 1),
              ElementsAre(StartsWith("--decoupled-min-lr 1e-05 applies only with --decoupled-lr")));
  c.mutable_optimizer()->set_decoupled_lr(1e-4f);
  EXPECT_THAT(ValidateConfig(c, 1), IsEmpty());
  c.mutable_optimizer()->set_decoupled_min_lr(2e-4f);
  EXPECT_THAT(ValidateConfig(c, 1),
              ElementsAre(StartsWith("--decoupled-min-lr 0.0002 is larger than --decoupled-lr")));
  c.mutable_optimizer()->clear_decoupled_min_lr();
  c.mutable_optimizer()->set_min_lr(3e-4f);
  c.mutable_optimizer()->set_lr(1e-3f);
  EXPECT_THAT(ValidateConfig(c, 1),
              ElementsAre(AllOf(StartsWith("--min-lr 0.0003 is larger than --decoupled-lr"),
                                HasSubstr("set --decoupled-min-lr <= --decoupled-lr"))));
  c.mutable_optimizer()->set_min_lr(0);
  c.mutable_optimizer()->set_decoupled_lr(-1);
  EXPECT_THAT(ValidateConfig(c, 1), ElementsAre(StartsWith("--decoupled-lr -1 must not be")));
}

}  // namespace
}  // namespace conveyor
