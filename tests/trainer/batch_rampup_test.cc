// --rampup-batch-size (trainer/config/batch_rampup.h): the schedule of global batches against
// values worked out by hand from Megatron's formula; validation; and training: a ramped
// one-rank run equals the same steps run as a chain of constant-batch runs (each
// resuming the last one's checkpoint, with the hand-computed batch sizes), a run resumed
// mid-ramp equals the uninterrupted one bit for bit, and a pipeline whose micro-batch
// count changes every ramp step, or data parallelism with overlapped gradient reduction,
// follows the one-rank run.
#include "trainer/config/batch_rampup.h"

#include <algorithm>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/trainer/config_fixtures.h"
#include "tests/trainer/layout_runs.h"
#include "tests/util/test_dirs.h"
#include "trainer/config/config_validation.h"

namespace conveyor::testing_util {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

MATCHER_P3(Stage, batch, steps, first_consumed, "") {
  return arg.batch == batch && arg.steps == steps && arg.first_consumed == first_consumed;
}

// The ramp of `t` towards its --global-batch-size (the sequence length matters only to
// --step-batch-size-schedule).
BatchRampup RampOf(const TrainingConfig& t) { return BatchRampup(t, t.global_batch_size(), 0); }

TrainingConfig Ramp(int64_t start, int64_t increment, int64_t samples, int32_t global_batch) {
  TrainingConfig t;
  t.add_rampup_batch_size(start);
  t.add_rampup_batch_size(increment);
  t.add_rampup_batch_size(samples);
  t.set_global_batch_size(global_batch);
  return t;
}

// START 2, INCREMENT 2, SAMPLES 10 towards 8: n = 3 increments, one per 10/3 samples.
// Step batches: consumed 0 -> 2 + 2*floor(0/3.33) = 2; 2 -> 2; 4 -> 4 (4/3.33 = 1.2);
// 8 -> 6 (2.4); 14 > 10 -> 8 from then on.
TEST(BatchRampupTest, FollowsMegatronsFormula) {
  const BatchRampup ramp = RampOf(Ramp(2, 2, 10, 8));
  EXPECT_TRUE(ramp.ramps());
  EXPECT_EQ(ramp.GlobalBatchAt(0), 2);
  EXPECT_EQ(ramp.GlobalBatchAt(3), 2);
  EXPECT_EQ(ramp.GlobalBatchAt(4), 4);
  EXPECT_EQ(ramp.GlobalBatchAt(6), 4);
  EXPECT_EQ(ramp.GlobalBatchAt(7), 6);   // 7 / 3.33 = 2.1
  EXPECT_EQ(ramp.GlobalBatchAt(10), 8);  // 10 / 3.33 = 3 (in double: exactly 3.0)
  EXPECT_EQ(ramp.GlobalBatchAt(11), 8);
  EXPECT_THAT(ramp.Stages(46),
              ElementsAre(Stage(2, 2, 0), Stage(4, 1, 4), Stage(6, 1, 8), Stage(8, 4, 14)));
  // 4 ramp steps consume 14 samples; then (46 - 14) // 8 = 4 steps.
  EXPECT_EQ(ramp.TrainIters(46), 8);
  EXPECT_EQ(ramp.TrainIters(45), 7);
  // Fewer samples than the ramp consumes: the run ends at the last whole batch that fits
  // (2 + 2 = 4 samples; the next step's 4 would pass 6), not Megatron's 4 + (6 - 14) // 8.
  EXPECT_EQ(ramp.TrainIters(6), 2);
  EXPECT_THAT(ramp.Stages(6), ElementsAre(Stage(2, 2, 0)));
  EXPECT_EQ(ramp.TrainIters(1), 0);
  // Without the flag: constant.
  TrainingConfig constant;
  constant.set_global_batch_size(8);
  EXPECT_FALSE(RampOf(constant).ramps());
  EXPECT_EQ(RampOf(constant).GlobalBatchAt(0), 8);
  EXPECT_THAT(RampOf(constant).Stages(46), ElementsAre(Stage(8, 5, 0)));
  EXPECT_EQ(RampOf(constant).TrainIters(46), 5);
}

// Megatron's meaning of --train-samples, computed here step by step and independently of
// BatchRampup: every step trains on START + INCREMENT * int(consumed / (SAMPLES / n))
// samples (GLOBAL once consumed > SAMPLES) while that whole batch fits in what is left.
struct Walk {
  int64_t steps = 0;
  int64_t consumed = 0;
  std::vector<int64_t> distinct_batches;
};
Walk StepByStep(int64_t start, int64_t increment, int64_t samples, int64_t global,
                int64_t train_samples) {
  const double per_increment =
      static_cast<double>(samples) / static_cast<double>((global - start) / increment);
  Walk walk;
  for (;;) {
    const int64_t batch =
        walk.consumed > samples
            ? global
            : start + increment *
                          static_cast<int64_t>(static_cast<double>(walk.consumed) / per_increment);
    if (walk.consumed + batch > train_samples) return walk;
    if (walk.distinct_batches.empty() || walk.distinct_batches.back() != batch) {
      walk.distinct_batches.push_back(batch);
    }
    walk.consumed += batch;
    ++walk.steps;
  }
}

// Runs shorter and longer than the ramp, ramps with one increment and with many, and
// increments that skip stages (SAMPLES / n smaller than a batch).
TEST(BatchRampupTest, StagesAndIterationsFollowTheStepByStepWalk) {
  struct Case {
    int64_t start, increment, samples, global;
  };
  for (const Case& c : {Case{2, 2, 10, 8}, Case{4, 4, 1000, 8}, Case{16, 16, 58593, 1536},
                        Case{1, 1, 7, 64}, Case{3, 6, 100000, 603}, Case{8, 8, 1, 64}}) {
    for (const int64_t train_samples : {int64_t{0}, int64_t{1}, int64_t{40}, int64_t{409},
                                        int64_t{410}, int64_t{5000}, int64_t{1000003}}) {
      SCOPED_TRACE(::testing::Message() << c.start << " " << c.increment << " " << c.samples
                                        << " -> " << c.global << ", " << train_samples);
      const BatchRampup ramp = RampOf(Ramp(c.start, c.increment, c.samples, c.global));
      const Walk want = StepByStep(c.start, c.increment, c.samples, c.global, train_samples);
      EXPECT_EQ(ramp.TrainIters(train_samples), want.steps);
      int64_t consumed = 0;
      std::vector<int64_t> batches;
      for (const RampStage& stage : ramp.Stages(train_samples)) {
        EXPECT_EQ(stage.first_consumed, consumed);
        EXPECT_GE(stage.steps, 1);
        consumed += stage.steps * stage.batch;
        if (batches.empty() || batches.back() != stage.batch) batches.push_back(stage.batch);
      }
      EXPECT_EQ(consumed, want.consumed);
      EXPECT_LE(consumed, train_samples);
      EXPECT_EQ(batches, want.distinct_batches);
    }
  }
}

// A ramp over 1.9e9 samples towards 8 has about 6e8 steps but three stages: planning it
// counts stages (the step-by-step list took minutes and gigabytes).
TEST(BatchRampupTest, BillionsOfSamplesTakeOneStagePerBatch) {
  const BatchRampup ramp = RampOf(Ramp(2, 2, 1900000000, 8));
  const std::vector<RampStage> stages = ramp.Stages(2000000000);
  // Stage k holds the steps that start below (k + 1) * 1.9e9 / 3 consumed samples; at
  // exactly 1.9e9 the formula gives 2 + 2 * 3 = 8.
  EXPECT_THAT(stages, ElementsAre(Stage(2, 316666667, 0),            // 0, 2, ..., 633333332
                                  Stage(4, 158333334, 633333334),    // ..., 1266666666
                                  Stage(6, 105555555, 1266666670),   // ..., 1899999994
                                  Stage(8, 12500000, 1900000000)));  // (2e9 - 1.9e9) / 8
  EXPECT_EQ(ramp.TrainIters(2000000000), 316666667 + 158333334 + 105555555 + 12500000);
}

// Megatron's GPT-3 175B recipe: 16 16 5859375 towards 1536, so 95 increments of
// 61677.63... samples. The expected values were computed with Megatron's expressions in
// Python (float division, int() truncation, the update_train_iters loop).
TEST(BatchRampupTest, Gpt3RecipeRamp) {
  const BatchRampup ramp = RampOf(Ramp(16, 16, 5859375, 1536));
  EXPECT_EQ(ramp.GlobalBatchAt(61677), 16);
  EXPECT_EQ(ramp.GlobalBatchAt(61678), 32);
  EXPECT_EQ(ramp.GlobalBatchAt(5859374), 1520);
  EXPECT_EQ(ramp.GlobalBatchAt(5859375), 1536);  // 95 increments at exactly SAMPLES
  const std::vector<RampStage> stages = ramp.Stages(146484375);
  ASSERT_EQ(stages.size(), 96u);  // 95 batches of the ramp, then 1536
  int64_t ramp_steps = 0;
  for (size_t i = 0; i + 1 < stages.size(); ++i) ramp_steps += stages[i].steps;
  EXPECT_EQ(ramp_steps, 19802);
  EXPECT_EQ(stages[0].steps, 3855);
  EXPECT_EQ(stages[94].batch, 1520);
  EXPECT_EQ(stages[95].first_consumed, 5859424);
  // --train-samples 146484375: 19802 ramp steps (5859424 samples), then 91552 of 1536.
  EXPECT_EQ(ramp.TrainIters(146484375), 111354);
}

std::vector<std::string> Problems(const TrainingConfig& t) {
  Config c = TinyConfig(Layout{});
  *c.mutable_training() = t;
  c.mutable_training()->set_micro_batch_size(2);
  c.mutable_optimizer()->set_lr_decay_iters(0);
  c.mutable_optimizer()->set_lr_warmup_iters(0);
  return ValidateConfig(c, 1);
}

TEST(BatchRampupTest, ValidationNamesTheFlagAndTheFix) {
  TrainingConfig t = Ramp(2, 2, 10, 8);
  t.set_train_samples(46);
  EXPECT_THAT(Problems(t), ::testing::IsEmpty());
  t.set_train_samples(0);
  t.set_train_iters(10);
  EXPECT_THAT(Problems(t), ElementsAre(HasSubstr("give --train-samples instead of --train-iters")));
  t = Ramp(2, 4, 10, 8);  // 8 - 2 is not a multiple of 4
  t.set_train_samples(46);
  EXPECT_THAT(Problems(t), ElementsAre(HasSubstr("must exceed START by a multiple of INCREMENT")));
  t = Ramp(8, 2, 10, 8);  // no increment
  t.set_train_samples(46);
  EXPECT_THAT(Problems(t), ElementsAre(HasSubstr("drop the flag")));
  t = Ramp(3, 5, 10, 8);  // reaches 3, not a multiple of micro-batch 2
  t.set_train_samples(46);
  EXPECT_THAT(Problems(t), ElementsAre(HasSubstr("reaches a global batch of 3, not a multiple of "
                                                 "--micro-batch-size x DP = 2")));
  t = Ramp(2, 2, 10, 8);
  t.mutable_rampup_batch_size()->RemoveLast();
  t.set_train_samples(46);
  EXPECT_THAT(Problems(t), ElementsAre(HasSubstr("takes three numbers")));
}

// The tiny model with --rampup-batch-size 2 2 10 towards 8 over 46 samples: the steps
// train on 2, 2, 4, 6, 8, 8, 8, 8 samples (one per micro-batch). A constant learning
// rate keeps the schedule out of the comparison with iteration-based runs.
Config Ramped(const Layout& layout) {
  Config c = TinyConfig(layout);
  TrainingConfig& t = *c.mutable_training();
  for (const int64_t v : {2, 2, 10}) t.add_rampup_batch_size(v);
  t.set_global_batch_size(8);
  t.set_num_micro_batches(0);
  t.set_train_iters(0);
  t.set_train_samples(46);
  OptimizerConfig& o = *c.mutable_optimizer();
  o.set_lr_decay_style("constant");
  o.set_lr_warmup_iters(0);
  o.set_lr_decay_iters(0);
  o.set_lr_decay_samples(0);
  return c;
}

TEST(RampedTrainingTest, EqualsAChainOfConstantBatchRuns) {
  absl::StatusOr<LayoutRun> ramped = RunLayout(Ramped(Layout{}), "ramped");
  ASSERT_TRUE(ramped.ok()) << ramped.status();
  ASSERT_EQ(ramped->losses.size(), 8u);

  const std::string dir = FreshDir("chain_ckpt");
  std::vector<double> chained;
  // Hand-computed: two steps of 2, one of 4, one of 6, then 8 up to iteration 8.
  struct Segment {
    int32_t global_batch, last_iteration;
  };
  for (const Segment& s : {Segment{2, 2}, Segment{4, 3}, Segment{6, 4}, Segment{8, 8}}) {
    absl::StatusOr<LayoutRun> run =
        RunLayout(ConstantBatchSegment(s.global_batch, s.last_iteration, dir),
                  "chain_" + std::to_string(s.last_iteration));
    ASSERT_TRUE(run.ok()) << run.status();
    chained.insert(chained.end(), run->losses.begin(), run->losses.end());
  }
  EXPECT_EQ(ramped->losses, chained);  // bit for bit
}

TEST(RampedTrainingTest, ResumedMidRampEqualsStraightThrough) {
  absl::StatusOr<LayoutRun> full = RunLayout(Ramped(Layout{}), "ramp_full");
  ASSERT_TRUE(full.ok()) << full.status();
  const std::string dir = FreshDir("ramp_ckpt");
  Config first = Ramped(Layout{});
  first.mutable_checkpoint()->set_save(dir);
  first.mutable_checkpoint()->set_exit_interval(3);  // after 8 samples: batch 4 -> 6 next
  absl::StatusOr<LayoutRun> head = RunLayout(first, "ramp_head");
  ASSERT_TRUE(head.ok()) << head.status();
  ASSERT_EQ(head->losses.size(), 3u);
  Config second = Ramped(Layout{});
  second.mutable_checkpoint()->set_load(dir);
  absl::StatusOr<LayoutRun> tail = RunLayout(second, "ramp_tail");
  ASSERT_TRUE(tail.ok()) << tail.status();
  ASSERT_EQ(full->losses.size(), 8u);
  EXPECT_EQ(head->losses, std::vector<double>(full->losses.begin(), full->losses.begin() + 3));
  EXPECT_EQ(tail->losses, std::vector<double>(full->losses.begin() + 3, full->losses.end()));
  EXPECT_EQ(tail->params, full->params);
}

// M = 2, 2, 4, 6, 8, ...: each step plans the interleaved schedule for its own M.
TEST(RampedTrainingTest, PipelineWithAChangingMicroBatchCountFollowsOneRank) {
  Layout pipeline = Pipeline(2, "interleaved-1f1b", 2, 4);
  absl::StatusOr<LayoutRun> reference = RunLayout(Ramped(OneRank(pipeline)), "ramp_one_rank");
  ASSERT_TRUE(reference.ok()) << reference.status();
  absl::StatusOr<LayoutRun> run = RunLayout(Ramped(pipeline), "ramp_pp2_v2");
  ASSERT_TRUE(run.ok()) << run.status();
  ExpectCurvesFollow(*run, *reference, 1e-5, 1e-5);
  for (const std::string& problem : CompareParams(run->params, reference->params)) {
    ADD_FAILURE() << problem;
  }
}

// DP 2 with the distributed optimizer and overlapped reduction: M = 1, 1, 2, 3, 4, ...,
// so the count of micro-batches whose gradients the overlap waits for changes too.
TEST(RampedTrainingTest, OverlappedDataParallelFollowsOneRank) {
  Layout dp = TpDp(1, 2, false, true);
  dp.overlap_grad_reduce = true;
  absl::StatusOr<LayoutRun> reference = RunLayout(Ramped(OneRank(dp)), "ramp_dp_reference");
  ASSERT_TRUE(reference.ok()) << reference.status();
  absl::StatusOr<LayoutRun> run = RunLayout(Ramped(dp), "ramp_dp2_overlap");
  ASSERT_TRUE(run.ok()) << run.status();
  ExpectCurvesFollow(*run, *reference, 1e-5, 1e-5);
  for (const std::string& problem : CompareParams(run->params, reference->params)) {
    ADD_FAILURE() << problem;
  }
}

}  // namespace
}  // namespace conveyor::testing_util
