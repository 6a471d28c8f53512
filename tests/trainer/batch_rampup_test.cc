// --rampup-batch-size (trainer/batch_rampup.h): the schedule of global batches against
// values worked out by hand from Megatron's formula; validation; and training: a ramped
// one-rank run equals the same steps run as a chain of constant-batch runs (each
// resuming the last one's checkpoint, with the hand-computed batch sizes), a run resumed
// mid-ramp equals the uninterrupted one bit for bit, and a pipeline whose micro-batch
// count changes every ramp step, or data parallelism with overlapped gradient reduction,
// follows the one-rank run.
#include "trainer/batch_rampup.h"

#include <algorithm>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/trainer/layout_runs.h"
#include "tests/util/test_dirs.h"
#include "trainer/config_validation.h"

namespace conveyor::testing_util {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

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
  const BatchRampup ramp(Ramp(2, 2, 10, 8));
  EXPECT_TRUE(ramp.ramps());
  EXPECT_EQ(ramp.GlobalBatchAt(0), 2);
  EXPECT_EQ(ramp.GlobalBatchAt(3), 2);
  EXPECT_EQ(ramp.GlobalBatchAt(4), 4);
  EXPECT_EQ(ramp.GlobalBatchAt(6), 4);
  EXPECT_EQ(ramp.GlobalBatchAt(7), 6);   // 7 / 3.33 = 2.1
  EXPECT_EQ(ramp.GlobalBatchAt(10), 8);  // 10 / 3.33 = 3 (in double: exactly 3.0)
  EXPECT_EQ(ramp.GlobalBatchAt(11), 8);
  EXPECT_THAT(ramp.RampSteps(), ElementsAre(2, 2, 4, 6));
  // 4 ramp steps consume 14 samples; then (46 - 14) // 8 = 4 steps.
  EXPECT_EQ(ramp.TrainIters(46), 8);
  EXPECT_EQ(ramp.TrainIters(45), 7);
  // Fewer samples than the ramp consumes: Python's floor division, (6 - 14) // 8 = -1.
  EXPECT_EQ(ramp.TrainIters(6), 3);
  // Without the flag: constant.
  TrainingConfig constant;
  constant.set_global_batch_size(8);
  EXPECT_FALSE(BatchRampup(constant).ramps());
  EXPECT_EQ(BatchRampup(constant).GlobalBatchAt(0), 8);
  EXPECT_TRUE(BatchRampup(constant).RampSteps().empty());
  EXPECT_EQ(BatchRampup(constant).TrainIters(46), 5);
}

// Megatron's GPT-3 175B recipe: 16 16 5859375 towards 1536, so 95 increments of
// 61677.63... samples. The expected values were computed with Megatron's expressions in
// Python (float division, int() truncation, the update_train_iters loop).
TEST(BatchRampupTest, Gpt3RecipeRamp) {
  const BatchRampup ramp(Ramp(16, 16, 5859375, 1536));
  EXPECT_EQ(ramp.GlobalBatchAt(61677), 16);
  EXPECT_EQ(ramp.GlobalBatchAt(61678), 32);
  EXPECT_EQ(ramp.GlobalBatchAt(5859374), 1520);
  EXPECT_EQ(ramp.GlobalBatchAt(5859375), 1536);  // 95 increments at exactly SAMPLES
  const std::vector<int64_t> steps = ramp.RampSteps();
  ASSERT_EQ(steps.size(), 19802u);
  EXPECT_EQ(std::count(steps.begin(), steps.end(), 16), 3855);
  EXPECT_EQ(steps.back(), 1520);
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

// Iterations up to `last` at a constant global batch, resuming `dir`'s checkpoint.
Config ConstantSegment(int32_t global_batch, int32_t last, const std::string& dir) {
  Config c = TinyConfig(Layout{});
  c.mutable_training()->set_global_batch_size(global_batch);
  c.mutable_training()->set_num_micro_batches(0);
  c.mutable_training()->set_train_iters(last);
  c.mutable_optimizer()->set_lr_decay_style("constant");
  c.mutable_optimizer()->set_lr_warmup_iters(0);
  c.mutable_optimizer()->set_lr_decay_iters(last);
  c.mutable_checkpoint()->set_save(dir);
  c.mutable_checkpoint()->set_load(dir);
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
        RunLayout(ConstantSegment(s.global_batch, s.last_iteration, dir),
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
