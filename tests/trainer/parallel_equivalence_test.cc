// The central test of docs/design.md §3: the tiny GPT trained for 10 iterations under
// TP x PP x DP layouts (with and without sequence parallelism, the distributed
// optimizer and overlapped gradient reduction, every pipeline schedule, virtual
// stages, uneven splits, tied and untied embeddings) matches the one-rank run of the same model:
// per-iteration loss and gradient norm within 1e-5 relative, and every parameter after training.
// Under --bf16 (emulated on the CPU) a layout rounds partial sums at other places than one
// rank does, so the curves agree to bf16 precision instead. Context parallelism (CP 2
// and 4, with each other dimension), document masking, RoPE's long-context scalings
// (Llama 3.1, YaRN), sliding-window attention and multi-latent attention join the same
// list.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/trainer/layout_runs.h"

namespace conveyor::testing_util {
namespace {

class ParallelEquivalenceTest : public ::testing::TestWithParam<Layout> {};

TEST_P(ParallelEquivalenceTest, MatchesOneRank) {
  const Layout layout = GetParam();
  const LayoutRun& reference = ReferenceRun(layout);
  absl::StatusOr<LayoutRun> run = RunLayout(TinyConfig(layout), LayoutName(layout));
  ASSERT_TRUE(run.ok()) << run.status();
  ExpectCurvesFollow(*run, reference, 1e-5, 1e-5);
  for (const std::string& problem : CompareParams(run->params, reference.params)) {
    ADD_FAILURE() << problem;
  }
}

// Context parallelism (ring attention over chunks r and 2CP-1-r) alone and with each
// other dimension.
std::vector<Layout> ContextParallelLayouts() {
  Layout cp2 = TpDp(1, 1, false, false);
  cp2.cp = 2;
  Layout cp4 = cp2;
  cp4.cp = 4;
  Layout cp_tp = TpDp(2, 1, true, false);  // with sequence parallelism inside the CP shard
  cp_tp.cp = 2;
  Layout cp_tp_llama = TpDp(2, 1, false, false);  // RoPE by global position, grouped heads
  cp_tp_llama.cp = 2;
  cp_tp_llama.llama = true;
  Layout cp_pp = Pipeline(2, "1f1b", 1, 2);
  cp_pp.cp = 2;
  Layout cp_interleaved = Pipeline(2, "interleaved-1f1b", 2, 4);
  cp_interleaved.cp = 2;
  Layout cp_dp = TpDp(1, 2, false, true);  // the distributed optimizer over DP x CP
  cp_dp.cp = 2;
  std::vector<Layout> layouts = {cp2, cp4, cp_tp, cp_tp_llama, cp_pp, cp_interleaved, cp_dp};
  // Each again with document masking (--eod-mask-loss, --reset-position-ids,
  // --reset-attention-mask): a chunk's keys and positions come from other documents too.
  for (size_t i = 0, n = layouts.size(); i < n; ++i) {
    layouts.push_back(layouts[i]);
    layouts.back().documents = true;
  }
  Layout per_token = cp_dp;  // --calculate-per-token-loss: each CP rank's tokens' share
  per_token.documents = per_token.per_token_loss = true;
  layouts.push_back(per_token);
  return layouts;
}

// Document masking (--eod-mask-loss, --reset-position-ids, --reset-attention-mask;
// learned positions and RoPE), also with --calculate-per-token-loss.
std::vector<Layout> DocumentLayouts() {
  std::vector<Layout> all = {TpDp(2, 1, false, false), Pipeline(2, "1f1b", 1, 2),
                             Pipeline(2, "interleaved-1f1b", 2, 4), TpDp(1, 2, false, true)};
  Layout llama_tp = TpDp(2, 1, true, false);  // RoPE, sequence parallel
  llama_tp.llama = true;
  all.push_back(llama_tp);
  for (Layout& l : all) l.documents = true;
  Layout per_token = TpDp(1, 2, false, true);
  per_token.documents = per_token.per_token_loss = true;
  all.push_back(per_token);
  Layout per_token_pp = Pipeline(2, "1f1b", 1, 2);
  per_token_pp.documents = per_token_pp.per_token_loss = true;
  all.push_back(per_token_pp);
  return all;
}

// Llama 3.1's and YaRN's RoPE and a sliding window on every other layer: the scaled
// table is looked up by global position (CP, SP), and the window's ring blocks wholly
// outside it (CP 4) are skipped.
std::vector<Layout> PositionAndWindowLayouts() {
  Layout yarn_tp = TpDp(2, 2, true, true);
  Layout llama3_pp = Pipeline(2, "interleaved-1f1b", 2, 4);
  Layout window_cp2 = TpDp(1, 2, false, true);
  window_cp2.cp = 2;
  Layout window_cp4 = TpDp(1, 1, false, false);
  window_cp4.cp = 4;
  Layout documents_cp2 = TpDp(2, 1, true, false);
  documents_cp2.cp = 2;
  documents_cp2.documents = true;
  yarn_tp.rope_scaling = window_cp2.rope_scaling = "yarn";
  llama3_pp.rope_scaling = window_cp4.rope_scaling = documents_cp2.rope_scaling = "llama3";
  std::vector<Layout> layouts = {yarn_tp, llama3_pp, window_cp2, window_cp4, documents_cp2};
  for (Layout& l : layouts) l.llama = true;
  for (size_t i = 1; i < layouts.size(); ++i) layouts[i].window = 2;
  return layouts;
}

// Multi-latent attention: its up-projections split by heads over TP (the replicated
// down-projections' and latent norms' gradients summed over the group), its rotated key
// part carried around the CP ring inside every head's key, its weight gradients deferred
// by zero-bubble schedules, and its layer rebuilt by recomputation.
std::vector<Layout> MlaLayouts() {
  Layout tp_dp = TpDp(2, 2, true, true);
  Layout pp = Pipeline(2, "interleaved-1f1b", 2, 4);
  pp.tp = 2;
  Layout zero_bubble = Pipeline(2, "zb-h1", 1, 2);
  Layout cp = TpDp(1, 2, false, true);
  cp.cp = 2;
  Layout cp_tp = TpDp(2, 1, true, false);
  cp_tp.cp = 2;
  Layout full = TpDp(2, 1, false, false);
  full.recompute = "full";
  Layout selective = TpDp(2, 1, true, false);
  selective.recompute = "selective";
  Layout yarn = TpDp(2, 1, true, false);
  yarn.rope_scaling = "yarn";
  std::vector<Layout> layouts = {tp_dp, pp, zero_bubble, cp, cp_tp, full, selective, yarn};
  for (Layout& l : layouts) {
    l.llama = true;
    l.mla = true;
  }
  return layouts;
}

// Multi-token prediction (two depths on the last stage): their embedding's copy there
// joins the embedding group (PP, also untied), the rolled tokens and labels cross
// context-parallel chunks, M_k's output is gathered over TP and scattered under SP.
std::vector<Layout> MtpLayouts() {
  Layout tp = TpDp(2, 2, true, true);
  Layout pp = Pipeline(2, "1f1b", 1, 2);
  Layout pp_tp_v = Pipeline(2, "interleaved-1f1b", 2, 4);
  pp_tp_v.tp = 2;
  Layout zbv = Pipeline(2, "zbv", 2, 4);  // both copies of the embedding on rank 0
  Layout cp = TpDp(1, 2, false, true);
  cp.cp = 2;
  cp.documents = true;
  Layout recompute = Pipeline(2, "1f1b", 1, 2);
  recompute.recompute = "full";
  Layout per_token = TpDp(1, 2, false, false);
  per_token.documents = per_token.per_token_loss = true;
  std::vector<Layout> layouts = {tp, pp, pp_tp_v, zbv, cp, recompute, per_token};
  for (Layout& l : layouts) {
    l.llama = true;
    l.mtp = 2;
  }
  return layouts;
}

std::vector<Layout> AllLayouts() {
  std::vector<Layout> all = {
      TpDp(2, 1, false, false), TpDp(2, 1, true, false),  TpDp(1, 2, false, false),
      TpDp(1, 2, false, true),  TpDp(2, 2, false, false), TpDp(2, 2, true, true),
      TpDp(2, 2, true, false),  TpDp(2, 2, false, true),  TpDp(4, 1, false, false),
      TpDp(4, 1, true, false),  TpDp(1, 4, false, false), TpDp(1, 4, false, true),
  };
  for (const char* schedule : {"gpipe", "1f1b", "zb-h1", "zb-h2"}) {
    all.push_back(Pipeline(2, schedule, 1, 2));
    all.push_back(Pipeline(4, schedule, 1, 4));
  }
  all.push_back(Pipeline(2, "interleaved-1f1b", 2, 4));
  all.push_back(Pipeline(4, "interleaved-1f1b", 2, 8));
  all.push_back(Pipeline(2, "zbv", 2, 4));
  all.push_back(Pipeline(4, "zbv", 2, 8));
  Layout uneven = Pipeline(2, "1f1b", 1, 3);
  uneven.first_stage_layers = 1;
  all.push_back(uneven);
  Layout embedding_counted = Pipeline(2, "1f1b", 1, 3);
  embedding_counted.account_for_embedding = true;  // stages of 1 and 2 layers
  all.push_back(embedding_counted);
  Layout overlap = TpDp(1, 2, false, false);
  overlap.overlap_grad_reduce = true;
  all.push_back(overlap);
  Layout overlap_pp = Pipeline(2, "zb-h1", 1, 2);
  overlap_pp.dp = 2;
  overlap_pp.overlap_grad_reduce = true;
  all.push_back(overlap_pp);
  Layout untied = Pipeline(2, "1f1b", 1, 2);
  untied.untied = true;
  all.push_back(untied);
  Layout untied_v = Pipeline(2, "zbv", 2, 4);
  untied_v.untied = true;
  all.push_back(untied_v);
  Layout llama_tp = TpDp(2, 2, true, true);  // grouped-query heads split over TP
  llama_tp.llama = true;
  all.push_back(llama_tp);
  Layout llama_pp = Pipeline(2, "interleaved-1f1b", 2, 4);
  llama_pp.tp = 2;
  llama_pp.llama = true;
  all.push_back(llama_pp);
  // --qk-layernorm: each TP rank normalises its own heads, so the norms' gradients are
  // sums over the TP ranks.
  Layout qk_norm = TpDp(2, 1, false, false);
  qk_norm.qk_layernorm = true;
  all.push_back(qk_norm);
  Layout qk_norm_llama = TpDp(2, 2, true, true);
  qk_norm_llama.llama = true;
  qk_norm_llama.qk_layernorm = true;
  all.push_back(qk_norm_llama);
  Layout qk_norm_pp = Pipeline(2, "zb-h1", 1, 2);  // the norms' W later than B
  qk_norm_pp.qk_layernorm = true;
  all.push_back(qk_norm_pp);
  Layout everything = Pipeline(2, "1f1b", 1, 2);
  everything.tp = 2;
  everything.dp = 2;
  everything.sequence_parallel = true;
  everything.distributed_optimizer = true;
  all.push_back(everything);
  Layout everything_v = Pipeline(2, "interleaved-1f1b", 2, 4);
  everything_v.tp = 2;
  everything_v.dp = 2;
  all.push_back(everything_v);
  // WSD with --decoupled-lr: the embedding, its tied copy on the last stage and the
  // vocabulary-parallel output layer step at the decoupled rate in every layout.
  Layout wsd_tied_pp = Pipeline(2, "1f1b", 1, 2);
  wsd_tied_pp.tp = 2;
  wsd_tied_pp.wsd_decoupled_lr = true;
  all.push_back(wsd_tied_pp);
  Layout wsd_untied_dp = TpDp(2, 2, true, true);
  wsd_untied_dp.untied = true;
  wsd_untied_dp.wsd_decoupled_lr = true;
  all.push_back(wsd_untied_dp);
  // --squared-relu: fc1's column shards each square their own columns.
  Layout squared_relu_tp = TpDp(2, 2, true, true);
  squared_relu_tp.squared_relu = true;
  all.push_back(squared_relu_tp);
  Layout squared_relu_pp = Pipeline(2, "interleaved-1f1b", 2, 4);
  squared_relu_pp.tp = 2;
  squared_relu_pp.squared_relu = true;
  all.push_back(squared_relu_pp);
  for (const Layout& layout : ContextParallelLayouts()) all.push_back(layout);
  for (const Layout& layout : DocumentLayouts()) all.push_back(layout);
  for (const Layout& layout : PositionAndWindowLayouts()) all.push_back(layout);
  for (const Layout& layout : MtpLayouts()) all.push_back(layout);
  for (const Layout& layout : MlaLayouts()) all.push_back(layout);
  return all;
}

INSTANTIATE_TEST_SUITE_P(Layouts, ParallelEquivalenceTest, ::testing::ValuesIn(AllLayouts()),
                         [](const ::testing::TestParamInfo<Layout>& test) {
                           return LayoutName(test.param);
                         });

// The document flags change the run (so the equivalence above is not that of plain
// runs): the masked curve leaves the plain one, and per-token weighting leaves the
// per-micro-batch mean's.
TEST(DocumentMaskingTest, MaskingAndPerTokenLossChangeTheRun) {
  Layout plain;
  Layout documents;
  documents.documents = true;
  Layout per_token = documents;
  per_token.per_token_loss = true;
  const LayoutRun& a = ReferenceRun(plain);
  const LayoutRun& b = ReferenceRun(documents);
  const LayoutRun& c = ReferenceRun(per_token);
  ASSERT_EQ(a.losses.size(), 10u);
  ASSERT_EQ(b.losses.size(), 10u);
  ASSERT_EQ(c.losses.size(), 10u);
  double masked_gap = 0.0, per_token_gap = 0.0;
  for (size_t i = 0; i < 10; ++i) {
    masked_gap = std::max(masked_gap, std::fabs(a.losses[i] - b.losses[i]) / a.losses[i]);
    per_token_gap =
        std::max(per_token_gap, std::fabs(b.grad_norms[i] - c.grad_norms[i]) / b.grad_norms[i]);
  }
  EXPECT_GT(masked_gap, 1e-3);
  EXPECT_GT(per_token_gap, 1e-4);
}

// The scalings and the window change the run (so the equivalence above is not that of
// plain RoPE and full attention).
TEST(PositionAndWindowTest, ScalingAndWindowChangeTheRun) {
  Layout plain;
  plain.llama = true;
  Layout yarn = plain, llama3 = plain, window = plain;
  yarn.rope_scaling = "yarn";
  llama3.rope_scaling = "llama3";
  window.window = 2;
  // The scaled runs against unscaled RoPE of the same base (100).
  Config unscaled_config = TinyConfig(plain);
  unscaled_config.mutable_model()->set_rotary_base(100.0f);
  const absl::StatusOr<LayoutRun> unscaled = RunLayout(unscaled_config, "unscaled_base_100");
  ASSERT_TRUE(unscaled.ok()) << unscaled.status();
  for (const Layout* other : {&yarn, &llama3, &window}) {
    const LayoutRun& base = other == &window ? ReferenceRun(plain) : *unscaled;
    const LayoutRun& run = ReferenceRun(*other);
    ASSERT_EQ(run.losses.size(), 10u);
    double gap = 0.0;
    for (size_t i = 0; i < 10; ++i) {
      gap = std::max({gap, std::fabs(run.losses[i] - base.losses[i]) / base.losses[i],
                      std::fabs(run.grad_norms[i] - base.grad_norms[i]) / base.grad_norms[i]});
    }
    EXPECT_GT(gap, 2e-4) << LayoutName(*other);  // 20 times the layouts' tolerance
  }
}

// Overlapping the distributed optimizer's communication with compute moves the same
// bytes at other times: the run is bit-identical to the same layout without overlap.
TEST(OverlapTest, OverlappedDistributedOptimizerIsBitIdentical) {
  for (const bool bf16 : {false, true}) {
    Layout plain = Pipeline(2, "1f1b", 1, 2);
    plain.dp = 2;
    plain.distributed_optimizer = true;
    plain.bf16 = bf16;
    plain.overlap_grad_reduce = true;  // the same buckets (2000 elements) in both runs
    Layout overlapped = plain;
    overlapped.overlap_param_gather = true;
    Layout serial = plain;
    serial.overlap_grad_reduce = false;
    absl::StatusOr<LayoutRun> reference = RunLayout(TinyConfig(overlapped), LayoutName(overlapped));
    ASSERT_TRUE(reference.ok()) << reference.status();
    Config serial_config = TinyConfig(serial);
    serial_config.mutable_parallel()->set_ddp_bucket_size(2000);
    absl::StatusOr<LayoutRun> run = RunLayout(serial_config, LayoutName(serial) + "_serial");
    ASSERT_TRUE(run.ok()) << run.status();
    EXPECT_EQ(run->losses, reference->losses) << LayoutName(overlapped);
    EXPECT_EQ(run->grad_norms, reference->grad_norms) << LayoutName(overlapped);
    EXPECT_EQ(run->params, reference->params) << LayoutName(overlapped);
  }
}

class Bf16EquivalenceTest : public ::testing::TestWithParam<Layout> {};

TEST_P(Bf16EquivalenceTest, FollowsOneRankToBf16Precision) {
  const Layout layout = GetParam();
  const LayoutRun& reference = ReferenceRun(layout);
  absl::StatusOr<LayoutRun> run = RunLayout(TinyConfig(layout), LayoutName(layout));
  ASSERT_TRUE(run.ok()) << run.status();
  // bf16 keeps 8 significant bits (relative rounding 2^-9 = 0.2%), compounded over the
  // steps.
  ExpectCurvesFollow(*run, reference, 1e-2, 5e-2);
}

std::vector<Layout> Bf16Layouts() {
  Layout tp_dp = TpDp(2, 2, true, true);
  Layout tp_pp = Pipeline(2, "zb-h1", 1, 2);
  tp_pp.tp = 2;
  for (Layout* l : {&tp_dp, &tp_pp}) l->bf16 = true;
  // fp32 training whose gradients travel and are summed as bf16.
  Layout bf16_reduce = TpDp(1, 2, false, false);
  bf16_reduce.grad_reduce_in_bf16 = true;
  Layout bf16_reduce_distributed = TpDp(2, 2, true, true);
  bf16_reduce_distributed.grad_reduce_in_bf16 = true;
  bf16_reduce_distributed.overlap_grad_reduce = true;
  // Ring attention under bf16: blocks merged in fp32, key/value gradients fp32.
  Layout cp_dp = TpDp(1, 2, false, true);
  cp_dp.cp = 2;
  cp_dp.bf16 = true;
  cp_dp.documents = true;
  return {tp_dp, tp_pp, bf16_reduce, bf16_reduce_distributed, cp_dp};
}

INSTANTIATE_TEST_SUITE_P(Layouts, Bf16EquivalenceTest, ::testing::ValuesIn(Bf16Layouts()),
                         [](const ::testing::TestParamInfo<Layout>& test) {
                           return LayoutName(test.param);
                         });

}  // namespace
}  // namespace conveyor::testing_util
