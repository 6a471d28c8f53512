// --step-batch-size-schedule (trainer/config/batch_rampup.h): Megatron's parse and its batch per
// step against a walk written here from StepBatchsizeNumMicroBatchesCalculator, the
// validation, the resolved config and plan, and training: a scheduled one-rank run
// equals the same steps run as a chain of constant-batch runs, under --train-samples
// and under --train-iters, and a run resumed between two entries equals the
// uninterrupted one bit for bit.
#include <cstdint>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/trainer/config_fixtures.h"
#include "tests/trainer/layout_runs.h"
#include "tests/util/test_dirs.h"
#include "trainer/config/batch_rampup.h"
#include "trainer/config/config_validation.h"

namespace conveyor::testing_util {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;

MATCHER_P3(Stage, batch, steps, first_consumed, "") {
  return arg.batch == batch && arg.steps == steps && arg.first_consumed == first_consumed;
}

TrainingConfig Scheduled(const std::string& schedule) {
  TrainingConfig t;
  t.set_step_batch_size_schedule(schedule);
  return t;
}

// Megatron's GPT-3 175B recipe at --seq-length 2048: the thresholds are tokens,
// int(float("2.4") * 10**9) // 2048 = 1171875 samples and so on (worked in Python).
TEST(StepBatchScheduleTest, ParsesMegatronsGpt3Schedule) {
  const absl::StatusOr<std::vector<BatchStep>> steps =
      ParseStepBatchSizeSchedule("0:16 2.4B:320 4.8B:624 7.2B:928 9.6B:1232 12B:1536", 2048);
  ASSERT_TRUE(steps.ok()) << steps.status();
  std::vector<std::pair<int64_t, int64_t>> got;
  for (const BatchStep& s : *steps) got.push_back({s.first_sample, s.batch});
  EXPECT_THAT(got, ElementsAre(std::pair<int64_t, int64_t>{0, 16},
                               std::pair<int64_t, int64_t>{1171875, 320},
                               std::pair<int64_t, int64_t>{2343750, 624},
                               std::pair<int64_t, int64_t>{3515625, 928},
                               std::pair<int64_t, int64_t>{4687500, 1232},
                               std::pair<int64_t, int64_t>{5859375, 1536}));
  // Commas, lower-case suffixes, any order; batches take suffixes too.
  const absl::StatusOr<std::vector<BatchStep>> loose =
      ParseStepBatchSizeSchedule(" 1k:2k,0:1.5K ", 10);
  ASSERT_TRUE(loose.ok()) << loose.status();
  ASSERT_EQ(loose->size(), 2u);
  EXPECT_EQ((*loose)[0].first_sample, 0);
  EXPECT_EQ((*loose)[0].batch, 1500);
  EXPECT_EQ((*loose)[1].first_sample, 100);
  EXPECT_EQ((*loose)[1].batch, 2000);
}

TEST(StepBatchScheduleTest, RefusesWhatMegatronRefuses) {
  auto message = [](const std::string& text, int64_t seq) {
    return std::string(ParseStepBatchSizeSchedule(text, seq).status().message());
  };
  EXPECT_THAT(message("0:16 100", 1), HasSubstr("entry '100' is not THRESHOLD:BATCH_SIZE"));
  EXPECT_THAT(message("10:16 100:32", 1), HasSubstr("the first threshold must be 0"));
  // 1100 and 1200 tokens are both sample 1 of 1024 tokens.
  EXPECT_THAT(message("0:16 1100:32 1200:64", 1024),
              HasSubstr("strictly increasing in samples of --seq-length 1024 tokens; two are "
                        "at 1 samples"));
  EXPECT_THAT(message("0:0", 1), HasSubstr("the batch size must be positive"));
  EXPECT_THAT(message("0:x", 1), HasSubstr("'x' is not a number"));
  EXPECT_THAT(message("", 1), HasSubstr("no THRESHOLD:BATCH_SIZE entry"));
}

// StepBatchsizeNumMicroBatchesCalculator._get_batch_size_for_samples, and the loop of
// Megatron's update_train_iters, which here stops at the last whole batch that fits.
int64_t MegatronBatch(const std::vector<std::pair<int64_t, int64_t>>& schedule, int64_t consumed) {
  int64_t batch = schedule[0].second;
  for (const auto& [threshold, bs] : schedule) {
    if (consumed >= threshold) {
      batch = bs;
    } else {
      break;
    }
  }
  return batch;
}

TEST(StepBatchScheduleTest, StagesFollowTheStepByStepWalk) {
  // Tokens of 4-token samples: 0, 12 (3 samples), 40 (10), 44 (11), 200 (50); batches
  // rise, fall and skip an entry (a step of 8 from 8 passes both 10 and 11).
  const std::string text = "0:4 12:8 40:2 44:6 200:16";
  const std::vector<std::pair<int64_t, int64_t>> samples = {
      {0, 4}, {3, 8}, {10, 2}, {11, 6}, {50, 16}};
  TrainingConfig t = Scheduled(text);
  const BatchRampup schedule(t, 0, 4);
  EXPECT_TRUE(schedule.ramps());
  EXPECT_EQ(schedule.final_batch(), 16);
  for (int64_t consumed = 0; consumed < 120; ++consumed) {
    EXPECT_EQ(schedule.GlobalBatchAt(consumed), MegatronBatch(samples, consumed)) << consumed;
  }
  for (const int64_t train_samples : {3, 4, 11, 12, 37, 100, 101, 1000}) {
    std::vector<int64_t> walk;
    for (int64_t consumed = 0;;) {
      const int64_t batch = MegatronBatch(samples, consumed);
      if (consumed + batch > train_samples) break;
      walk.push_back(batch);
      consumed += batch;
    }
    std::vector<int64_t> from_stages;
    for (const RampStage& stage : schedule.Stages(train_samples)) {
      for (int64_t i = 0; i < stage.steps; ++i) from_stages.push_back(stage.batch);
    }
    EXPECT_EQ(from_stages, walk) << train_samples;
    EXPECT_EQ(schedule.TrainIters(train_samples), static_cast<int64_t>(walk.size()));
  }
  // 4 (0..4), 8 (4..12, passing 10: its 2 never trains), 6 from 12 to 54, and 16 would
  // pass 60.
  EXPECT_THAT(schedule.Stages(60), ElementsAre(Stage(4, 1, 0), Stage(8, 1, 4), Stage(6, 7, 12)));
  // Under --train-iters: whole stages up to the step count.
  t.set_train_iters(12);
  EXPECT_THAT(schedule.RunStages(t),
              ElementsAre(Stage(4, 1, 0), Stage(8, 1, 4), Stage(6, 7, 12), Stage(16, 3, 54)));
}

// TinyConfig (8-token samples, micro-batch 1, one rank) with a schedule.
Config WithSchedule(const std::string& schedule) {
  Config c = TinyConfig(Layout{});
  c.mutable_training()->set_step_batch_size_schedule(schedule);
  c.mutable_training()->set_global_batch_size(0);
  c.mutable_training()->set_num_micro_batches(0);
  return c;
}

// Counted in samples: the schedule's lengths too.
void BySamples(int64_t train_samples, Config* c) {
  c->mutable_training()->set_train_iters(0);
  c->mutable_training()->set_train_samples(train_samples);
  c->mutable_optimizer()->set_lr_warmup_iters(0);
  c->mutable_optimizer()->set_lr_decay_iters(0);
}

TEST(StepBatchScheduleTest, ValidationNamesTheFlagAndTheFix) {
  Config c = WithSchedule("0:2 32:4 64:8");
  EXPECT_THAT(ValidateConfig(c, 1), IsEmpty());
  c.mutable_training()->set_global_batch_size(8);  // the last batch: as Megatron's recipe
  EXPECT_THAT(ValidateConfig(c, 1), IsEmpty());
  c.mutable_training()->set_global_batch_size(16);
  EXPECT_THAT(ValidateConfig(c, 1),
              ElementsAre(AllOf(StartsWith("--step-batch-size-schedule '0:2 32:4 64:8' ends at a "
                                           "global batch of 8, not --global-batch-size 16"),
                                HasSubstr("set it to 8"))));
  c = WithSchedule("0:2 32:4 64:8");
  for (const int64_t v : {2, 2, 10}) c.mutable_training()->add_rampup_batch_size(v);
  BySamples(46, &c);
  EXPECT_THAT(ValidateConfig(c, 1), ElementsAre(HasSubstr("and --rampup-batch-size both set")));
  c = WithSchedule("0:2 32:3 64:8");
  c.mutable_training()->set_micro_batch_size(2);
  EXPECT_THAT(ValidateConfig(c, 1),
              ElementsAre(HasSubstr("reaches a global batch of 3, not a multiple of "
                                    "--micro-batch-size x DP = 2")));
  c = WithSchedule("0:2 32:4 3:8");  // 3 tokens: sample 0 again
  EXPECT_THAT(ValidateConfig(c, 1),
              ElementsAre(AllOf(StartsWith("--step-batch-size-schedule '0:2 32:4 3:8': "),
                                HasSubstr("strictly increasing"), HasSubstr("Megatron's form"))));
}

TEST(StepBatchScheduleTest, ResolvesTheLastBatchAndTheSteps) {
  Config c = WithSchedule("0:2 32:4 64:8");
  BySamples(46, &c);
  const absl::StatusOr<Config> resolved = ResolveConfig(c, 1);
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_EQ(resolved->training().global_batch_size(), 8);
  EXPECT_EQ(resolved->training().num_micro_batches(), 8);
  EXPECT_EQ(resolved->training().train_iters(), 7);  // 2, 2, 4, 8, 8, 8, 8 = 40 samples
}

// 8-token samples: the batch is 2 up to sample 4, 4 up to 8, then 8. A constant learning
// rate keeps the schedule's lengths out of the comparison with the constant runs.
Config ScheduledRun(bool by_samples) {
  Config c = WithSchedule("0:2 32:4 64:8");
  if (by_samples) {
    BySamples(46, &c);  // 7 steps, 40 samples
  } else {
    c.mutable_training()->set_train_iters(7);
  }
  OptimizerConfig& o = *c.mutable_optimizer();
  o.set_lr_decay_style("constant");
  o.set_lr_warmup_iters(0);
  return c;
}

TEST(StepBatchScheduleTrainingTest, EqualsAChainOfConstantBatchRuns) {
  const std::string dir = FreshDir("schedule_chain_ckpt");
  std::vector<double> chained;
  // Hand-computed: two steps of 2 (samples 0-4), one of 4 (4-8), four of 8 (8-40).
  struct Segment {
    int32_t global_batch, last_iteration;
  };
  for (const Segment& s : {Segment{2, 2}, Segment{4, 3}, Segment{8, 7}}) {
    absl::StatusOr<LayoutRun> run =
        RunLayout(ConstantBatchSegment(s.global_batch, s.last_iteration, dir),
                  "schedule_chain_" + std::to_string(s.last_iteration));
    ASSERT_TRUE(run.ok()) << run.status();
    chained.insert(chained.end(), run->losses.begin(), run->losses.end());
  }
  ASSERT_EQ(chained.size(), 7u);
  for (const bool by_samples : {true, false}) {
    absl::StatusOr<LayoutRun> scheduled =
        RunLayout(ScheduledRun(by_samples), by_samples ? "scheduled_samples" : "scheduled_iters");
    ASSERT_TRUE(scheduled.ok()) << scheduled.status();
    EXPECT_EQ(scheduled->losses, chained) << (by_samples ? "--train-samples" : "--train-iters");
  }
}

TEST(StepBatchScheduleTrainingTest, ResumedBetweenEntriesEqualsStraightThrough) {
  absl::StatusOr<LayoutRun> full = RunLayout(ScheduledRun(false), "schedule_full");
  ASSERT_TRUE(full.ok()) << full.status();
  const std::string dir = FreshDir("schedule_ckpt");
  Config first = ScheduledRun(false);
  first.mutable_checkpoint()->set_save(dir);
  first.mutable_checkpoint()->set_exit_interval(2);  // after 4 samples: batch 4 next
  absl::StatusOr<LayoutRun> head = RunLayout(first, "schedule_head");
  ASSERT_TRUE(head.ok()) << head.status();
  Config second = ScheduledRun(false);
  second.mutable_checkpoint()->set_load(dir);
  absl::StatusOr<LayoutRun> tail = RunLayout(second, "schedule_tail");
  ASSERT_TRUE(tail.ok()) << tail.status();
  ASSERT_EQ(full->losses.size(), 7u);
  EXPECT_EQ(head->losses, std::vector<double>(full->losses.begin(), full->losses.begin() + 2));
  EXPECT_EQ(tail->losses, std::vector<double>(full->losses.begin() + 2, full->losses.end()));
  EXPECT_EQ(tail->params, full->params);
}

}  // namespace
}  // namespace conveyor::testing_util
