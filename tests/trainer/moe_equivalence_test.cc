// docs/design.md §3 for mixtures of experts: the tiny GPT with an MoE layer in every
// layer (top-2 of 4 experts, both auxiliary losses, a capacity that drops tokens) trained
// for 10 iterations under tensor- (with sequence parallelism, as Megatron requires),
// pipeline- and data-parallel layouts matches its one-rank run: loss and gradient norm
// within 1e-5 relative, and every parameter after training. The router works per
// micro-batch on all its tokens, so every layout routes (and drops) the same tokens and
// weighs the auxiliary losses alike (1 / (M * DP), as Megatron does); under TP the experts
// are split like the dense MLP (or over --expert-tensor-parallel-size ranks, the TP ranks
// then sharing their rows), and recomputation rebuilds a layer's routing and exchanges
// alike. With --moe-router-enable-expert-bias the layouts also end with the one-rank run's
// expert biases.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/trainer/layout_runs.h"

namespace conveyor::testing_util {
namespace {

Layout Moe(Layout layout) {
  layout.moe = true;
  return layout;
}

// Auxiliary-loss-free balancing (sigmoid scores, a bias rate that changes the routing):
// every layout's expert biases (compared as parameters) move alike, so data-parallel
// ranks must sum their token counts before the update; tensor-parallel ranks route the
// same tokens and hold the same biases.
Layout MoeExpertBias(Layout layout) {
  layout.moe = true;
  layout.expert_bias = true;
  return layout;
}

class MoeEquivalenceTest : public ::testing::TestWithParam<Layout> {};

TEST_P(MoeEquivalenceTest, MatchesOneRank) {
  const Layout layout = GetParam();
  const Config one = TinyConfig(OneRank(layout));
  absl::StatusOr<LayoutRun> reference = RunLayout(one, "reference_" + LayoutName(layout));
  ASSERT_TRUE(reference.ok()) << reference.status();
  ASSERT_TRUE(reference->params.count("layers.1.mlp.experts.3.fc2.weight"));
  if (layout.expert_bias) {
    const std::vector<float>& bias = reference->params.at("layers.1.mlp.router.expert_bias");
    ASSERT_EQ(bias.size(), 4u);
    EXPECT_NE(bias, std::vector<float>(4, 0.0f)) << "the expert bias never moved";
  }
  absl::StatusOr<LayoutRun> run = RunLayout(TinyConfig(layout), LayoutName(layout));
  ASSERT_TRUE(run.ok()) << run.status();
  ExpectCurvesFollow(*run, *reference, 1e-5, 1e-5);
  for (const std::string& problem : CompareParams(run->params, reference->params)) {
    ADD_FAILURE() << problem;
  }
}

std::vector<Layout> MoeLayouts() {
  Layout zero_bubble_dp = Pipeline(2, "zb-h1", 1, 2);  // experts' W later than their B
  zero_bubble_dp.dp = 2;
  Layout tp_pp = Pipeline(2, "1f1b", 1, 2);
  tp_pp.tp = 2;
  tp_pp.sequence_parallel = true;
  Layout expert_parallel_bias = MoeExpertBias(TpDp(1, 4, false, true));
  expert_parallel_bias.ep = 2;  // the counts still sum over all four data-parallel ranks
  return {Moe(Pipeline(2, "1f1b", 1, 2)),
          Moe(TpDp(1, 2, false, true)),
          Moe(Pipeline(2, "interleaved-1f1b", 2, 4)),
          Moe(zero_bubble_dp),
          Moe(TpDp(2, 1, true, false)),
          Moe(TpDp(2, 2, true, true)),
          Moe(tp_pp),
          MoeExpertBias(TpDp(1, 2, false, true)),
          MoeExpertBias(Pipeline(2, "1f1b", 1, 2)),
          MoeExpertBias(Pipeline(2, "interleaved-1f1b", 2, 4)),
          MoeExpertBias(TpDp(2, 1, true, false)),
          expert_parallel_bias};
}

INSTANTIATE_TEST_SUITE_P(Layouts, MoeEquivalenceTest, ::testing::ValuesIn(MoeLayouts()),
                         [](const ::testing::TestParamInfo<Layout>& test) {
                           return LayoutName(test.param);
                         });

// Expert parallelism: EP consecutive data-parallel ranks share the four experts, tokens
// cross the expert-parallel group to their experts and back, and the experts' gradients
// are summed over the expert-data-parallel ranks only (EP x expert DP = DP).
Layout ExpertParallel(Layout layout, int ep) {
  layout.moe = true;
  layout.ep = ep;
  return layout;
}

// --expert-tensor-parallel-size below TP: the TP ranks share each expert's rows, and the
// expert-parallel group spans TP ranks (and data-parallel ranks beyond them).
Layout ExpertTensorParallel(Layout layout, int ep, int etp) {
  layout = ExpertParallel(layout, ep);
  layout.etp = etp;
  return layout;
}

std::vector<Layout> ExpertParallelLayouts() {
  Layout pp_dp = Pipeline(2, "1f1b", 1, 2);
  pp_dp.dp = 2;
  Layout overlapped = TpDp(1, 4, false, false);
  overlapped.overlap_grad_reduce = true;
  Layout tp_pp = Pipeline(2, "1f1b", 1, 2);
  tp_pp.tp = 2;
  tp_pp.sequence_parallel = true;
  Layout recomputed = ExpertParallel(TpDp(1, 2, false, false), 2);
  recomputed.recompute = "full";
  Layout selective = ExpertTensorParallel(TpDp(2, 2, true, false), 2, 1);
  selective.recompute = "selective";
  return {recomputed,
          selective,
          ExpertTensorParallel(TpDp(2, 1, true, false), 1, 1),
          ExpertTensorParallel(TpDp(2, 1, true, false), 2, 1),
          ExpertTensorParallel(tp_pp, 2, 1),
          ExpertTensorParallel(TpDp(4, 1, true, false), 2, 2),
          ExpertTensorParallel(TpDp(2, 2, true, true), 2, 1),
          ExpertTensorParallel(TpDp(2, 2, true, false), 4, 1),
          ExpertParallel(TpDp(1, 2, false, false), 2),
          ExpertParallel(TpDp(1, 2, false, true), 2),
          ExpertParallel(TpDp(1, 4, false, false), 4),
          ExpertParallel(TpDp(2, 2, true, false), 2),
          ExpertParallel(pp_dp, 2),
          ExpertParallel(TpDp(1, 4, false, true), 2),
          ExpertParallel(overlapped, 2)};
}

// DeepSeek-V3's routing (group-limited sigmoid top-k, a gated shared expert): the groups
// are chosen per token from the whole router output, so every layout routes alike; the
// gate's weight gradient is a partial sum under TP, like the router's.
Layout GroupLimited(Layout layout, int ep, int etp = 0) {
  layout = ExpertTensorParallel(layout, ep, etp);
  layout.group_limited = true;
  return layout;
}

std::vector<Layout> GroupLimitedLayouts() {
  Layout pp = Pipeline(2, "1f1b", 1, 2);
  return {GroupLimited(TpDp(1, 2, false, false), 2), GroupLimited(TpDp(2, 2, true, true), 2, 1),
          GroupLimited(TpDp(2, 1, true, false), 1), GroupLimited(pp, 1)};
}

INSTANTIATE_TEST_SUITE_P(GroupLimited, MoeEquivalenceTest,
                         ::testing::ValuesIn(GroupLimitedLayouts()),
                         [](const ::testing::TestParamInfo<Layout>& test) {
                           return LayoutName(test.param);
                         });

// Megatron's load-balancing types and their list form (a coefficient each): seq_aux_loss
// is per sequence of the whole micro-batch, so every layout computes it alike;
// global_aux_loss counts the data-parallel ranks' micro-batches together
// (model/moe_global_load.h), so it equals one rank where no data-parallel rank splits
// the step (tensor, pipeline and expert-tensor layouts here, context parallelism in
// moe_context_parallel_test), and differs, as Megatron's does, under DP.
Layout Balanced(Layout layout, std::string types) {
  layout.moe = true;
  layout.load_balancing = std::move(types);
  return layout;
}

std::vector<Layout> LoadBalancingLayouts() {
  Layout pp = Pipeline(2, "interleaved-1f1b", 2, 4);
  Layout tp_recomputed = TpDp(2, 1, true, false);
  tp_recomputed.recompute = "full";
  return {Balanced(TpDp(1, 2, false, true), "aux_loss seq_aux_loss"),
          Balanced(ExpertParallel(TpDp(2, 2, true, false), 2), "seq_aux_loss aux_loss"),
          Balanced(TpDp(2, 1, true, false), "seq_aux_loss global_aux_loss"),
          Balanced(pp, "global_aux_loss"),
          Balanced(tp_recomputed, "global_aux_loss aux_loss")};
}

INSTANTIATE_TEST_SUITE_P(LoadBalancing, MoeEquivalenceTest,
                         ::testing::ValuesIn(LoadBalancingLayouts()),
                         [](const ::testing::TestParamInfo<Layout>& test) {
                           return LayoutName(test.param);
                         });

INSTANTIATE_TEST_SUITE_P(ExpertParallel, MoeEquivalenceTest,
                         ::testing::ValuesIn(ExpertParallelLayouts()),
                         [](const ::testing::TestParamInfo<Layout>& test) {
                           return LayoutName(test.param);
                         });

// One multi-token prediction depth after mixture-of-experts layers: the depth's layer is
// one too, its router's expert bias moves with the model's (sigmoid scores, every layout's
// counts summed alike), and DeepSeek-V3's group-limited routing with a gated shared
// expert reaches it as well.
std::vector<Layout> MtpLayouts() {
  Layout expert_parallel = MoeExpertBias(TpDp(1, 2, false, true));
  expert_parallel.ep = 2;
  std::vector<Layout> layouts = {expert_parallel, MoeExpertBias(TpDp(2, 1, true, false)),
                                 MoeExpertBias(Pipeline(2, "1f1b", 1, 2)),
                                 GroupLimited(TpDp(2, 2, true, true), 2, 1)};
  for (Layout& l : layouts) {
    l.llama = true;
    l.mtp = 1;
  }
  return layouts;
}

INSTANTIATE_TEST_SUITE_P(Mtp, MoeEquivalenceTest, ::testing::ValuesIn(MtpLayouts()),
                         [](const ::testing::TestParamInfo<Layout>& test) {
                           return LayoutName(test.param);
                         });

}  // namespace
}  // namespace conveyor::testing_util
