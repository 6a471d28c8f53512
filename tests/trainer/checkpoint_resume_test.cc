// Checkpoints end to end: a run stopped after 10 iterations and resumed for 10 more
// equals 20 uninterrupted iterations bit for bit (same layout; sync and async saves;
// replicated and distributed optimizer, the latter also under bf16; MoE expert biases), and
// a checkpoint saved under one layout resumes under others (TP, PP with virtual stages, CP,
// DP and the optimizer's sharding all change) to follow the uninterrupted run within the
// equivalence tolerance.
#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/trainer/layout_runs.h"
#include "tests/util/test_dirs.h"

namespace conveyor::testing_util {
namespace {

Config TwentyIterations(const Layout& layout) {
  Config c = TinyConfig(layout);
  c.mutable_training()->set_train_iters(20);
  c.mutable_optimizer()->set_lr_decay_iters(20);
  return c;
}

// The first half: 20-iteration schedule, stopped by --exit-interval 10 with a save.
absl::StatusOr<LayoutRun> FirstHalf(const Layout& layout, const std::string& save, bool async,
                                    const std::string& name) {
  Config c = TwentyIterations(layout);
  c.mutable_checkpoint()->set_save(save);
  c.mutable_checkpoint()->set_exit_interval(10);
  c.mutable_checkpoint()->set_async_save(async);
  return RunLayout(c, name);
}

absl::StatusOr<LayoutRun> SecondHalf(const Layout& layout, const std::string& load,
                                     const std::string& name) {
  Config c = TwentyIterations(layout);
  c.mutable_checkpoint()->set_load(load);
  return RunLayout(c, name);
}

struct ExactCase {
  std::string name;
  Layout layout;
  bool async;
};

class ResumeIsExactTest : public ::testing::TestWithParam<ExactCase> {};

TEST_P(ResumeIsExactTest, TenSaveTenEqualsTwenty) {
  const ExactCase& c = GetParam();
  absl::StatusOr<LayoutRun> full = RunLayout(TwentyIterations(c.layout), c.name + "_full");
  ASSERT_TRUE(full.ok()) << full.status();
  const std::string save = FreshDir(c.name + "_ckpt");
  absl::StatusOr<LayoutRun> first = FirstHalf(c.layout, save, c.async, c.name + "_first");
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->losses.size(), 10u);
  absl::StatusOr<LayoutRun> second = SecondHalf(c.layout, save, c.name + "_second");
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_EQ(full->losses.size(), 20u);
  const std::vector<double> tail(full->losses.begin() + 10, full->losses.end());
  EXPECT_EQ(std::vector<double>(full->losses.begin(), full->losses.begin() + 10), first->losses);
  EXPECT_EQ(second->losses, tail);  // bit for bit
  EXPECT_EQ(second->params, full->params);
}

Layout DistributedDp2() { return TpDp(1, 2, false, true); }

// Under --bf16 the distributed optimizer holds the fp32 values of the parameters read in
// bf16 only in its master shard: each DP rank saves and loads its own pieces.
Layout DistributedBf16Dp2() {
  Layout l = DistributedDp2();
  l.bf16 = true;
  return l;
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, ResumeIsExactTest,
    ::testing::Values(ExactCase{"one_rank_sync", Layout{}, false},
                      ExactCase{"one_rank_async", Layout{}, true},
                      ExactCase{"dp2_distributed_sync", DistributedDp2(), false},
                      ExactCase{"dp2_distributed_async", DistributedDp2(), true},
                      ExactCase{"dp2_distributed_bf16_sync", DistributedBf16Dp2(), false},
                      // The save waits for the step's overlapped gathers.
                      ExactCase{"dp2_distributed_bf16_overlap_async",
                                [] {
                                  Layout l = DistributedBf16Dp2();
                                  l.overlap_grad_reduce = true;
                                  l.overlap_param_gather = true;
                                  return l;
                                }(),
                                true},
                      ExactCase{"tp2_pp2_sync",
                                [] {
                                  Layout l = Pipeline(2, "1f1b", 1, 2);
                                  l.tp = 2;
                                  return l;
                                }(),
                                false},
                      // The expert biases (state, not parameters) saved and restored.
                      ExactCase{"dp2_moe_expert_bias_sync",
                                [] {
                                  Layout l = DistributedDp2();
                                  l.moe = true;
                                  l.expert_bias = true;
                                  return l;
                                }(),
                                false},
                      // WSD's anneal and --decoupled-lr's group follow the resumed
                      // iteration (the schedule's state is the iteration and samples).
                      ExactCase{"dp2_distributed_wsd_decoupled_lr_sync",
                                [] {
                                  Layout l = DistributedDp2();
                                  l.untied = true;
                                  l.wsd_decoupled_lr = true;
                                  return l;
                                }(),
                                false},
                      // --qk-layernorm's norms saved and restored.
                      ExactCase{"tp2_qk_layernorm_sync",
                                [] {
                                  Layout l = TpDp(2, 1, false, false);
                                  l.qk_layernorm = true;
                                  return l;
                                }(),
                                false}),
    [](const ::testing::TestParamInfo<ExactCase>& test) { return test.param.name; });

void ExpectFollows(const LayoutRun& run, const LayoutRun& reference) {
  ASSERT_EQ(run.losses.size(), 10u);
  for (size_t i = 0; i < 10; ++i) {
    EXPECT_NEAR(run.losses[i], reference.losses[10 + i], 1e-5 * reference.losses[10 + i])
        << "iteration " << 11 + i;
  }
  for (const std::string& problem : CompareParams(run.params, reference.params)) {
    ADD_FAILURE() << problem;
  }
}

// Save under TP2 x PP2 (V=2) x DP2 with the distributed optimizer; resume under
// TP1 x PP4 x DP2 with the replicated one, and under one rank.
TEST(CheckpointReshardingTest, ResumesUnderOtherLayouts) {
  Layout saving = Pipeline(2, "interleaved-1f1b", 2, 4);
  saving.tp = 2;
  saving.dp = 2;
  saving.distributed_optimizer = true;
  Layout one;
  one.layers = 4;
  absl::StatusOr<LayoutRun> reference = RunLayout(TwentyIterations(one), "reshard_reference");
  ASSERT_TRUE(reference.ok()) << reference.status();
  const std::string save = FreshDir("reshard_ckpt");
  absl::StatusOr<LayoutRun> first = FirstHalf(saving, save, false, "reshard_first");
  ASSERT_TRUE(first.ok()) << first.status();

  Layout pp4 = Pipeline(4, "1f1b", 1, 4);
  pp4.dp = 2;
  absl::StatusOr<LayoutRun> on_pp4 = SecondHalf(pp4, save, "reshard_pp4");
  ASSERT_TRUE(on_pp4.ok()) << on_pp4.status();
  ExpectFollows(*on_pp4, *reference);

  absl::StatusOr<LayoutRun> on_one = SecondHalf(one, save, "reshard_one");
  ASSERT_TRUE(on_one.ok()) << on_one.status();
  ExpectFollows(*on_one, *reference);
}

// Context parallelism changes only how each sample's tokens are split, and which ranks
// share the distributed optimizer's shards (DP x CP): a checkpoint saved under CP 2 x DP 2
// resumes under one rank, and one saved by one rank resumes under CP 4, both following
// the uninterrupted one-rank run.
TEST(CheckpointReshardingTest, ResumesAcrossContextParallelSizes) {
  Layout cp2 = TpDp(1, 2, false, true);
  cp2.cp = 2;
  Layout cp4 = TpDp(1, 1, false, false);
  cp4.cp = 4;
  const Layout one;
  absl::StatusOr<LayoutRun> reference = RunLayout(TwentyIterations(one), "cp_reference");
  ASSERT_TRUE(reference.ok()) << reference.status();
  const std::string from_cp2 = FreshDir("cp2_ckpt"), from_one = FreshDir("cp1_ckpt");
  ASSERT_TRUE(FirstHalf(cp2, from_cp2, false, "cp2_first").ok());
  ASSERT_TRUE(FirstHalf(one, from_one, false, "cp1_first").ok());
  absl::StatusOr<LayoutRun> on_one = SecondHalf(one, from_cp2, "cp2_to_one");
  ASSERT_TRUE(on_one.ok()) << on_one.status();
  ExpectFollows(*on_one, *reference);
  absl::StatusOr<LayoutRun> on_cp4 = SecondHalf(cp4, from_one, "one_to_cp4");
  ASSERT_TRUE(on_cp4.ok()) << on_cp4.status();
  ExpectFollows(*on_cp4, *reference);
}

// Multi-token prediction's depths live on the last pipeline stage with their copy of the
// word embedding, which no checkpoint writes twice: a checkpoint saved under PP 2 x TP 2
// with sequence parallelism resumes on one rank and under CP 2 x DP 2 with the distributed
// optimizer, both following the uninterrupted one-rank run.
TEST(CheckpointReshardingTest, MultiTokenPredictionResumesUnderOtherLayouts) {
  Layout saving = Pipeline(2, "1f1b", 1, 2);
  saving.tp = 2;
  saving.sequence_parallel = true;
  Layout one;
  Layout cp_dp = TpDp(1, 2, false, true);
  cp_dp.cp = 2;
  for (Layout* l : {&saving, &one, &cp_dp}) {
    l->llama = true;
    l->mtp = 2;
  }
  absl::StatusOr<LayoutRun> reference = RunLayout(TwentyIterations(one), "mtp_reference");
  ASSERT_TRUE(reference.ok()) << reference.status();
  const std::string save = FreshDir("mtp_ckpt");
  ASSERT_TRUE(FirstHalf(saving, save, false, "mtp_first").ok());
  absl::StatusOr<LayoutRun> on_one = SecondHalf(one, save, "mtp_to_one");
  ASSERT_TRUE(on_one.ok()) << on_one.status();
  ExpectFollows(*on_one, *reference);
  absl::StatusOr<LayoutRun> on_cp_dp = SecondHalf(cp_dp, save, "mtp_to_cp_dp");
  ASSERT_TRUE(on_cp_dp.ok()) << on_cp_dp.status();
  ExpectFollows(*on_cp_dp, *reference);
}

// A mixture of experts' experts are TP-sharded like the dense MLP: a checkpoint saved
// under TP 2 (with SP) x DP 2 and the distributed optimizer resumes on one rank and
// follows the uninterrupted one-rank run (routing, drops and auxiliary losses included;
// with --moe-router-enable-expert-bias also the expert biases, written once).
TEST(CheckpointReshardingTest, MixtureOfExpertsResumesUnderOtherLayouts) {
  for (const bool expert_bias : {false, true}) {
    const std::string name = expert_bias ? "moe_expert_bias" : "moe";
    Layout saving = TpDp(2, 2, true, true);
    saving.moe = true;
    saving.expert_bias = expert_bias;
    Layout one;
    one.moe = true;
    one.expert_bias = expert_bias;
    absl::StatusOr<LayoutRun> reference = RunLayout(TwentyIterations(one), name + "_reference");
    ASSERT_TRUE(reference.ok()) << reference.status();
    const std::string save = FreshDir(name + "_ckpt");
    ASSERT_TRUE(FirstHalf(saving, save, false, name + "_first").ok());
    absl::StatusOr<LayoutRun> on_one = SecondHalf(one, save, name + "_to_one");
    ASSERT_TRUE(on_one.ok()) << on_one.status();
    SCOPED_TRACE(name);
    ExpectFollows(*on_one, *reference);
  }
}

// Expert parallelism: each expert's values and optimizer state are written once (by the
// expert-data-parallel rank 0, or the distributed optimizer's expert-data shards) under
// the global expert index, so a checkpoint saved under EP 2 x expert DP 2 with the
// distributed optimizer resumes on one rank, and one saved on one rank resumes under
// EP 4, both following the uninterrupted one-rank run.
TEST(CheckpointReshardingTest, ResumesAcrossExpertParallelSizes) {
  Layout ep2 = TpDp(1, 4, false, true);
  ep2.moe = true;
  ep2.ep = 2;
  Layout ep4 = TpDp(1, 4, false, false);
  ep4.moe = true;
  ep4.ep = 4;
  Layout one;
  one.moe = true;
  absl::StatusOr<LayoutRun> reference = RunLayout(TwentyIterations(one), "ep_reference");
  ASSERT_TRUE(reference.ok()) << reference.status();
  const std::string from_ep2 = FreshDir("ep2_ckpt"), from_one = FreshDir("ep1_ckpt");
  ASSERT_TRUE(FirstHalf(ep2, from_ep2, false, "ep2_first").ok());
  ASSERT_TRUE(FirstHalf(one, from_one, false, "ep1_first").ok());
  absl::StatusOr<LayoutRun> on_one = SecondHalf(one, from_ep2, "ep2_to_one");
  ASSERT_TRUE(on_one.ok()) << on_one.status();
  ExpectFollows(*on_one, *reference);
  absl::StatusOr<LayoutRun> on_ep4 = SecondHalf(ep4, from_one, "one_to_ep4");
  ASSERT_TRUE(on_ep4.ok()) << on_ep4.status();
  ExpectFollows(*on_ep4, *reference);
}

// Expert tensor parallelism: whole experts saved under TP 2 with
// --expert-tensor-parallel-size 1 (EP 2 over the TP pairs, expert DP 2, distributed
// optimizer) resume with experts split over TP 2 (the default expert TP) and on one rank,
// following the uninterrupted one-rank run.
TEST(CheckpointReshardingTest, ResumesAcrossExpertTensorParallelSizes) {
  Layout whole_experts = TpDp(2, 2, true, true);
  whole_experts.moe = true;
  whole_experts.ep = 2;
  whole_experts.etp = 1;
  Layout split_experts = TpDp(2, 1, true, false);
  split_experts.moe = true;
  Layout one;
  one.moe = true;
  absl::StatusOr<LayoutRun> reference = RunLayout(TwentyIterations(one), "etp_reference");
  ASSERT_TRUE(reference.ok()) << reference.status();
  const std::string save = FreshDir("etp1_ckpt");
  ASSERT_TRUE(FirstHalf(whole_experts, save, false, "etp1_first").ok());
  for (const Layout& resumed : {split_experts, one}) {
    absl::StatusOr<LayoutRun> run = SecondHalf(resumed, save, "etp1_to_" + LayoutName(resumed));
    ASSERT_TRUE(run.ok()) << run.status();
    SCOPED_TRACE(LayoutName(resumed));
    ExpectFollows(*run, *reference);
  }
}

// The bf16 master pieces saved by DP 2 reshard: resumed under DP 4 (other pieces) and
// under one rank with the replicated optimizer (whole fp32 values), both follow the
// uninterrupted DP 2 run to bf16 precision (the equivalence test's tolerance).
TEST(CheckpointReshardingTest, Bf16MasterShardsResumeUnderOtherDataParallelSizes) {
  const Layout saving = DistributedBf16Dp2();
  absl::StatusOr<LayoutRun> reference = RunLayout(TwentyIterations(saving), "bf16_reference");
  ASSERT_TRUE(reference.ok()) << reference.status();
  const std::string save = FreshDir("bf16_reshard_ckpt");
  ASSERT_TRUE(FirstHalf(saving, save, false, "bf16_reshard_first").ok());
  Layout dp4 = saving;
  dp4.dp = 4;
  Layout one;
  one.bf16 = true;
  for (const Layout& resumed : {dp4, one}) {
    absl::StatusOr<LayoutRun> run = SecondHalf(resumed, save, "bf16_reshard_" + LayoutName(resumed));
    ASSERT_TRUE(run.ok()) << run.status();
    ASSERT_EQ(run->losses.size(), 10u);
    for (size_t i = 0; i < 10; ++i) {
      EXPECT_NEAR(run->losses[i], reference->losses[10 + i], 1e-2 * reference->losses[10 + i])
          << LayoutName(resumed) << ", iteration " << 11 + i;
    }
  }
}

}  // namespace
}  // namespace conveyor::testing_util
