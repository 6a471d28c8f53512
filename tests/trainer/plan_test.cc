// --dry-run's plan: the pipeline traffic of a step, against the arithmetic done here.
#include "trainer/planning/plan.h"

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/memory_model.h"
#include "model/model_shape.h"
#include "parallel/pipeline/schedule.h"
#include "parallel/pipeline/simulator.h"
#include "trainer/config/config_validation.h"
#include "trainer/config/flags.h"
#include "trainer/config/resolved_config.h"
#include "trainer/planning/pipeline_report.h"

namespace conveyor {
namespace {

using ::testing::HasSubstr;

constexpr int kMicroBatch = 4, kSeq = 128, kHidden = 128, kTp = 2, kPp = 2, kM = 4, kV = 2;

// The plan of `args` on `world` ranks.
std::string PlanOf(const std::vector<std::string>& args, int world) {
  absl::StatusOr<Config> parsed = ParseFlags(args);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  absl::StatusOr<ResolvedConfig> config = ResolvedConfig::Resolve(*parsed, world);
  EXPECT_TRUE(config.ok()) << config.status();
  absl::StatusOr<std::string> plan = FormatPlan(*config);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *plan : "";
}

// The plan of TP 2 x PP 2 (interleaved, V 2) on 4 ranks.
std::string Plan(const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"--mock-data",
                                   "--vocab-size",
                                   "512",
                                   "--num-layers",
                                   "4",
                                   "--hidden-size",
                                   absl::StrFormat("%d", kHidden),
                                   "--num-attention-heads",
                                   "4",
                                   "--seq-length",
                                   absl::StrFormat("%d", kSeq),
                                   "--micro-batch-size",
                                   absl::StrFormat("%d", kMicroBatch),
                                   "--num-micro-batches",
                                   absl::StrFormat("%d", kM),
                                   "--tensor-model-parallel-size",
                                   absl::StrFormat("%d", kTp),
                                   "--pipeline-model-parallel-size",
                                   absl::StrFormat("%d", kPp),
                                   "--num-virtual-stages-per-pipeline-rank",
                                   absl::StrFormat("%d", kV),
                                   "--nproc-per-node",
                                   "4"};
  args.insert(args.end(), extra.begin(), extra.end());
  return PlanOf(args, kTp * kPp);
}

// Activations forward and gradients back, fp32, for every micro-batch and chunk.
std::string PipelineTraffic(int tokens_per_rank) {
  const double bytes = 1.0 * kMicroBatch * tokens_per_rank * kHidden * 4 * 2 * kM * kV;
  return absl::StrFormat("pipeline %.2f MiB,", bytes / (1024 * 1024));
}

// RoPE's scaling and the sliding window are named; a plain model's plan has no such line.
TEST(PlanTest, AttentionLineNamesScalingAndWindow) {
  EXPECT_EQ(Plan({}).find("plan: attention"), std::string::npos);
  EXPECT_NE(Plan({"--position-embedding-type", "yarn", "--rotary-scaling-factor", "4",
                  "--window-size", "31,0", "--window-attn-skip-freq", "2"})
                .find("plan: attention: RoPE scaled by YaRN (s 4, original context 4096, beta "
                      "32/1, cos and sin x 1.1386); sliding window of the 31 keys before each "
                      "query in 2 of 4 layers\n"),
            std::string::npos);
  EXPECT_NE(Plan({"--position-embedding-type", "rope", "--use-rope-scaling"})
                .find("plan: attention: RoPE scaled as Llama 3.1 (factor 8, frequency factors 1 "
                      "and 4, original context 8192)\n"),
            std::string::npos);
}

TEST(PlanTest, PipelineTrafficMovesWholeActivations) {
  EXPECT_THAT(Plan({}), HasSubstr(PipelineTraffic(kSeq)));  // 4.00 MiB
}

TEST(PlanTest, PipelineTrafficUnderSequenceParallelismMovesTheTokenShard) {
  EXPECT_THAT(Plan({"--sequence-parallel"}), HasSubstr(PipelineTraffic(kSeq / kTp)));  // 2.00
}

TEST(PlanTest, Bf16ActivationsTravelAsBf16) {
  const double bytes = 1.0 * kMicroBatch * kSeq * kHidden * 2 * 2 * kM * kV;
  EXPECT_THAT(Plan({"--bf16"}), HasSubstr(absl::StrFormat("pipeline %.2f MiB,", bytes / (1 << 20))));
}

// One layer of hidden 64 on DP 2 ranks: N parameters, counted here.
std::string DataParallelTraffic(const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"--mock-data", "--vocab-size", "256", "--num-layers", "1",
                                   "--hidden-size", "64", "--num-attention-heads", "2",
                                   "--seq-length", "16", "--micro-batch-size", "1",
                                   "--nproc-per-node", "2"};
  args.insert(args.end(), extra.begin(), extra.end());
  const std::string text = PlanOf(args, 2);
  const size_t at = text.find("data-parallel ");
  return at == std::string::npos ? "" : text.substr(at, text.find(',', at) - at);
}

TEST(PlanTest, DataParallelTrafficFollowsTheOptimizerAndTheGradientType) {
  const int64_t h = 64;
  // Word and position tables, two LayerNorms, QKV, projection and MLP with biases, final norm.
  const int64_t n = 256 * h + 16 * h + 2 * 2 * h + (3 * h * h + 3 * h) + (h * h + h) +
                    (4 * h * h + 4 * h) + (4 * h * h + h) + 2 * h;
  auto mib = [](double bytes) { return absl::StrFormat("data-parallel %.2f MiB", bytes / (1 << 20)); };
  // A ring all-reduce: 2 (DP-1)/DP of the fp32 gradients.
  EXPECT_EQ(DataParallelTraffic({}), mib(4.0 * n));
  EXPECT_EQ(DataParallelTraffic({"--grad-reduce-in-bf16"}), mib(2.0 * n));
  // Reduce-scatter and all-gather, (DP-1)/DP each: fp32 gradients and values.
  EXPECT_EQ(DataParallelTraffic({"--use-distributed-optimizer"}), mib(0.5 * 4 * n + 0.5 * 4 * n));
}

// TP 2 with SP on 2 ranks, counted here: per micro-batch (4 of 4 x 128 tokens) each of
// 4 layers crosses its two tensor-parallel regions forward and backward (4 all-reduces'
// worth of the fp32 activations, 2 (TP-1)/TP of them each), the embedding and the output
// layer one each, and the cross-entropy all-reduces 3 doubles per token; after the step
// the norms' and the position table's gradients (each rank saw its sequence shard) are
// summed. The measured log line gives 18.998 MB for this run.
TEST(PlanTest, TensorParallelTrafficCountsEveryRegion) {
  std::vector<std::string> args = {"--mock-data", "--vocab-size", "512", "--num-layers", "4",
                                   "--hidden-size", "128", "--num-attention-heads", "4",
                                   "--seq-length", "128", "--micro-batch-size", "4",
                                   "--global-batch-size", "16", "--disable-bias-linear",
                                   "--tensor-model-parallel-size", "2", "--sequence-parallel",
                                   "--nproc-per-node", "2"};
  const double activation = 4.0 * 128 * 128 * 4;
  const double per_micro_batch = (4 * 4 + 2) * activation + 3 * 8.0 * 4 * 128;
  // LayerNorm weight and bias: 2 per layer and the final one; positions 128 x 128.
  const double summed = 4.0 * ((2 * 4 + 1) * 2 * 128 + 128 * 128);
  EXPECT_THAT(PlanOf(args, 2), HasSubstr(absl::StrFormat(
                                   "tensor-parallel %.2f MiB", (4 * per_micro_batch + summed) /
                                                                    (1 << 20))));
}

// CP 2 on 2 ranks: ring attention's blocks, counted here from the ring's steps.
TEST(PlanTest, ContextParallelTrafficIsRingAttentionsBlocks) {
  std::vector<std::string> args = {"--mock-data", "--vocab-size", "512", "--num-layers", "4",
                                   "--hidden-size", "128", "--num-attention-heads", "4",
                                   "--seq-length", "128", "--micro-batch-size", "4",
                                   "--num-micro-batches", "4", "--context-parallel-size", "2",
                                   "--nproc-per-node", "2"};
  const std::string plan = PlanOf(args, 2);
  // A key/value block: 4 samples x 64 tokens x (key + value) x 4 heads x 32 channels.
  const double block = 4.0 * 64 * 2 * 4 * 32;
  // Per layer and micro-batch: forward sends 1 block (fp32), backward 1 block and 2
  // fp32 gradient blocks; 4 layers, 4 micro-batches.
  const double bytes = 4 * 4 * (4.0 * block + 4.0 * block + 2 * 4.0 * block);
  EXPECT_THAT(plan, HasSubstr(absl::StrFormat("context-parallel %.2f MiB", bytes / (1 << 20))));
  EXPECT_THAT(plan, HasSubstr("CP 2 ranks share each sample, 64 tokens each"));
  EXPECT_THAT(plan, HasSubstr("rank  tp  cp  pp  dp"));
  // No pipeline; the gradients' all-reduce runs over DP x CP = 2 ranks.
  EXPECT_THAT(plan, HasSubstr("pipeline 0.00 MiB"));
  EXPECT_THAT(plan, ::testing::Not(HasSubstr("data-parallel 0.00 MiB")));
  // A mixture of experts (8 experts) adds its routers' all-gather of fp32 logits: each
  // rank sends its 4 x 64 tokens' 8 logits to the other rank, per layer and micro-batch.
  std::vector<std::string> moe = args;
  moe.insert(moe.end(), {"--num-experts", "8", "--disable-bias-linear"});
  const double logits = 4 * 4 * (4.0 * 64 * 8 * 4);
  EXPECT_THAT(PlanOf(moe, 2), HasSubstr(absl::StrFormat("context-parallel %.2f MiB",
                                                        (bytes + logits) / (1 << 20))));
}

// The mixture of experts of the expert-parallel plans: 4 MoE layers of 8 experts of width
// 64, hidden 128, micro-batches of 4 x 128 tokens; `more` flags added.
std::vector<std::string> MoeArgs(const std::vector<std::string>& more) {
  std::vector<std::string> args = {"--mock-data", "--vocab-size", "512", "--num-layers", "4",
                                   "--hidden-size", "128", "--num-attention-heads", "4",
                                   "--seq-length", "128", "--micro-batch-size", "4",
                                   "--num-experts", "8", "--moe-ffn-hidden-size", "64",
                                   "--disable-bias-linear", "--expert-model-parallel-size", "2",
                                   "--nproc-per-node", "4"};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// The plan's line for EP 2 x expert DP 2 on ranks 0-3 with expert-parallel groups [0,1]
// [2,3]: 4 of the 8 experts per rank (fc1 and fc2 of 64 x 128 each, whole: expert TP 1).
std::string ExpertParallelLine(double all_to_all_bytes) {
  return absl::StrFormat(
      "plan: expert parallelism: expert TP 1 x EP 2 x expert DP 2, 4 of 8 experts per rank "
      "per MoE layer (%d parameters per rank and layer); expert-parallel groups [0,1] [2,3]; "
      "expert-data-parallel groups [0,2] [1,3]; all-to-all at most %.2f MiB per step and rank",
      4 * (64 * 128 + 128 * 64), all_to_all_bytes / (1 << 20));
}

// EP 2 on DP 4: the expert groups as Megatron lays them out, each rank's experts, and the
// all-to-all's bytes counted here: per MoE layer and micro-batch 4 exchanges (dispatch,
// combine and their gradients) of 4 samples x 128 tokens x top-2 rows of 128 fp32
// channels, half of them to the other rank; 4 MoE layers, 2 micro-batches (batch 32).
TEST(PlanTest, ExpertParallelismNamesItsGroupsAndAllToAll) {
  const std::string plan = PlanOf(MoeArgs({"--global-batch-size", "32"}), 4);
  EXPECT_THAT(plan, HasSubstr(ExpertParallelLine(4 * 4 * 2 * (4.0 * 128 * 2 * 0.5 * 128 * 4))));
}

// --expert-tensor-parallel-size 1 under TP 2 (SP) on 4 ranks, EP 2: the expert-parallel
// groups are the TP pairs, each rank holds 4 whole experts, and sends its half of the
// routed rows (TP / ETP = 2 shares): 4 exchanges x 4 MoE layers x 2 micro-batches of
// 4 x 128 x 2 / 2 rows of 128 fp32 channels, half of them away. The model's total counts
// all 8 experts split over TP like the rest of a tensor-parallel rank's share.
TEST(PlanTest, ExpertTensorParallelismBelowTpSharesRows) {
  const std::vector<std::string> tp2 = {"--global-batch-size", "16",
                                        "--tensor-model-parallel-size", "2",
                                        "--sequence-parallel"};
  std::vector<std::string> etp1 = tp2;
  etp1.insert(etp1.end(), {"--expert-tensor-parallel-size", "1"});
  const std::string plan = PlanOf(MoeArgs(etp1), 4);
  EXPECT_THAT(plan, HasSubstr(ExpertParallelLine(4 * 4 * 2 * (4.0 * 128 * 2 / 2 * 0.5 * 128 * 4))));
  // The same model under TP 2 with the default expert TP (= 2) reports the same total.
  const std::string reference = PlanOf(MoeArgs(tp2), 4);
  const auto total_line = [](const std::string& text) {
    const size_t at = text.find("plan: mixture of experts");
    return text.substr(at, text.find('\n', at) - at);
  };
  EXPECT_EQ(total_line(plan), total_line(reference));
}

// Group-limited routing is named in the plan's MoE line, and the shared expert's gate
// adds one weight of hidden 128 per MoE layer to the parameters: 4 x 128.
TEST(PlanTest, GroupLimitedRoutingAndTheSharedExpertGate) {
  const std::vector<std::string> shared = {"--global-batch-size", "16",
                                           "--moe-shared-expert-intermediate-size", "64"};
  std::vector<std::string> gated = shared;
  gated.insert(gated.end(), {"--moe-shared-expert-gate", "--moe-router-num-groups", "4",
                             "--moe-router-group-topk", "2"});
  const std::string plan = PlanOf(MoeArgs(gated), 4);
  EXPECT_THAT(plan, HasSubstr("8 experts, top-2 from 2 of 4 expert groups, in 4 of 4 layers: "));
  const auto parameters = [](const std::string& text) {
    const size_t at = text.find(" layers: ", text.find("plan: mixture of experts"));
    return std::stoll(text.substr(at + 9));
  };
  EXPECT_EQ(parameters(plan) - parameters(PlanOf(MoeArgs(shared), 4)), 4 * 128);
}

// The MoE line names the load-balancing losses with their coefficients (Megatron's list
// form) and --moe-router-dtype fp32.
TEST(PlanTest, LoadBalancingLossesAndTheRouterDtype) {
  const std::string plan = PlanOf(
      MoeArgs({"--global-batch-size", "16", "--moe-router-load-balancing-type", "seq_aux_loss",
               "global_aux_loss", "--moe-aux-loss-coeff", "0.01", "0.001", "--bf16",
               "--moe-router-dtype", "fp32"}),
      4);
  EXPECT_THAT(plan, HasSubstr("active per token; seq_aux_loss x 0.01; global_aux_loss x 0.001; "
                              "router GEMM in fp32\n"));
}

// PP 2 on 2 ranks, 4 layers of hidden 64, micro-batches of 1 sample: `extra` sets the
// global batch and the schedule.
std::vector<std::string> PipelineArgs(const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"--mock-data", "--vocab-size",
                                   "256",         "--num-layers",
                                   "4",           "--hidden-size",
                                   "64",          "--num-attention-heads",
                                   "2",           "--seq-length",
                                   "16",          "--micro-batch-size",
                                   "1",           "--pipeline-model-parallel-size",
                                   "2",           "--nproc-per-node",
                                   "2",           "--dry-run"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// A global batch of 2e8 under PP 2 is 2e8 micro-batches a step: the plan simulates a
// prefix of the schedule (its lists for every micro-batch took many GB and ended in
// std::bad_alloc) and says so; the formula, the traffic and GPipe's stash are M's.
TEST(PlanTest, AHugeGlobalBatchIsPlannedFromAPrefixOfTheSchedule) {
  const std::string plan = PlanOf(PipelineArgs({"--global-batch-size", "200000000"}), 2);
  EXPECT_THAT(plan, HasSubstr("plan: schedule 1f1b, P 2, V 1, M 200000000,"));
  EXPECT_THAT(plan, HasSubstr("bubble 0.0% (formula), 0.1% (simulated for the first 1024 "
                              "micro-batches (the steady state repeats beyond))"));
  // Forward activations and backward gradients of 16 x 64 fp32 per micro-batch.
  EXPECT_THAT(
      plan, HasSubstr(absl::StrFormat("pipeline %.2f GiB,", 2.0 * 2e8 * 16 * 64 * 4 / (1 << 30))));
  const std::string gpipe =
      PlanOf(PipelineArgs({"--global-batch-size", "200000000", "--pipeline-schedule", "gpipe"}), 2);
  EXPECT_THAT(gpipe, ::testing::ContainsRegex(" 200000000 +[0-9.]+ MiB +[0-9.]+ GiB"));
}

// The memory a prefix predicts, extended to M, is what simulating all M micro-batches
// predicts, for every schedule (only GPipe's stash grows past the steady state).
TEST(PlanTest, APrefixPredictsTheMemoryOfAllMicroBatches) {
  struct Case {
    const char* schedule;
    const char* chunks;
  };
  for (const Case& c : {Case{"gpipe", "1"}, Case{"1f1b", "1"}, Case{"interleaved-1f1b", "2"},
                        Case{"zb-h1", "1"}, Case{"zb-h2", "1"}, Case{"zbv", "2"}}) {
    SCOPED_TRACE(c.schedule);
    absl::StatusOr<Config> parsed =
        ParseFlags(PipelineArgs({"--global-batch-size", "1030", "--pipeline-schedule", c.schedule,
                                 "--num-virtual-stages-per-pipeline-rank", c.chunks}));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    absl::StatusOr<ResolvedConfig> resolved = ResolvedConfig::Resolve(*parsed, 2);
    ASSERT_TRUE(resolved.ok()) << resolved.status();
    absl::StatusOr<BubblePrediction> prefix = PredictBubble(*resolved);
    ASSERT_TRUE(prefix.ok()) << prefix.status();
    EXPECT_LT(prefix->simulated_micro_batches, 1030);
    absl::StatusOr<std::vector<RankMemory>> extended = PredictRunMemory(*resolved, *prefix);
    ASSERT_TRUE(extended.ok()) << extended.status();
    absl::StatusOr<pipeline::Plan> all =
        pipeline::MakePlan(c.schedule, 2, std::stoi(c.chunks), 1030);
    ASSERT_TRUE(all.ok()) << all.status();
    absl::StatusOr<pipeline::SimulationResult> simulated = pipeline::Simulate(*all);
    ASSERT_TRUE(simulated.ok()) << simulated.status();
    absl::StatusOr<std::vector<RankMemory>> full =
        PredictMemory(MemoryInputsOf(*resolved), resolved->model_shape(), simulated->timeline);
    ASSERT_TRUE(full.ok()) << full.status();
    ASSERT_EQ(extended->size(), full->size());
    for (size_t r = 0; r < full->size(); ++r) {
      EXPECT_EQ((*extended)[r].peak_stashed, (*full)[r].peak_stashed) << "rank " << r;
      EXPECT_EQ((*extended)[r].activation_peak_bytes, (*full)[r].activation_peak_bytes)
          << "rank " << r;
    }
  }
}

}  // namespace
}  // namespace conveyor
