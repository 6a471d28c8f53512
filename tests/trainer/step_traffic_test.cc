// One step's traffic per rank and kind of parallelism (PredictStepTraffic), against figures
// worked out by hand below from the collectives each kind runs (docs/design.md §10).
#include "trainer/planning/step_traffic.h"

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "model/memory_model.h"
#include "trainer/config/flags.h"
#include "trainer/config/resolved_config.h"

namespace conveyor {
namespace {

// `args` resolved for `world` ranks.
ResolvedConfig Resolved(const std::vector<std::string>& args, int world) {
  absl::StatusOr<Config> parsed = ParseFlags(args);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  absl::StatusOr<ResolvedConfig> resolved = ResolvedConfig::Resolve(*parsed, world);
  EXPECT_TRUE(resolved.ok()) << resolved.status();
  return *std::move(resolved);
}

// TP 2 x CP 2 x PP 2 x DP 2 (16 ranks), SP, bf16, micro-batches of 2, M = 4, the
// replicated updater with fp32 gradients, on the first stage's rank.
TEST(StepTrafficTest, TensorContextPipelineAndDataParallelOnTheFirstStage) {
  const ResolvedConfig resolved = Resolved(
      {"--mock-data", "--vocab-size", "512", "--num-layers", "4", "--hidden-size", "32",
       "--ffn-hidden-size", "128", "--num-attention-heads", "4", "--group-query-attention",
       "--num-query-groups", "2", "--seq-length", "64", "--max-position-embeddings", "64",
       "--micro-batch-size", "2", "--num-micro-batches", "4", "--tensor-model-parallel-size",
       "2", "--context-parallel-size", "2", "--pipeline-model-parallel-size", "2",
       "--sequence-parallel", "--bf16"},
      16);
  ASSERT_EQ(resolved.dp(), 2);
  ASSERT_EQ(resolved.micro_batches(), 4);
  RankMemory first;
  first.parameters = 1000;
  first.first_stage = true;
  first.last_stage = false;
  first.tp_summed_elements = 100;

  const StepTraffic traffic = PredictStepTraffic(resolved, first);
  // A micro-batch holds 2 x 64 / CP 2 = 64 tokens on a rank; a bf16 element is 2 bytes.
  // Pipeline: 2 directions x M 4 x V 1 x 2 bytes x (64 tokens x 32 hidden / TP 2 under SP).
  EXPECT_DOUBLE_EQ(traffic.pipeline, 2.0 * 4 * 1 * 2 * (64 * 32 / 2));  // 16384
  // DP: a ring all-reduce over DP 2 x CP 2 = 4 replicas moves 2 x 3/4 of the fp32
  // gradients: 2 x 0.75 x 4 x 1000.
  EXPECT_DOUBLE_EQ(traffic.data_parallel, 6000.0);
  // TP: a share 2 (TP - 1) / TP = 1 of each buffer; per micro-batch 4 all-reduces per layer
  // for the stage's 2 layers and the embedding's region (first stage), each of 64 x 32
  // bf16 activations (4096 bytes), and the 100 TP-summed fp32 gradient elements once:
  // 4 x 9 x 4096 + 400.
  EXPECT_DOUBLE_EQ(traffic.tensor_parallel, 147856.0);
  // CP: per layer (2) and micro-batch (4), a key/value block of 64 tokens x 2 (K and V) x
  // (2 query groups / TP 2) x 8 = 1024 elements passes CP - 1 = 1 time forward and once
  // backward in bf16 (2 x 2 bytes), and CP 2 fp32 gradient blocks (2 x 4 bytes):
  // 2 x 4 x 1024 x 12; no router (dense).
  EXPECT_DOUBLE_EQ(traffic.context_parallel, 98304.0);
}

// TP 2 x DP 4 (8 ranks, one stage holding the embedding and the head), fp32, the
// distributed optimizer with bf16 gradient reduction, micro-batches of 1, M = 2.
TEST(StepTrafficTest, DistributedOptimizerAndTheHeadOnOneStage) {
  const ResolvedConfig resolved = Resolved(
      {"--mock-data", "--vocab-size", "512", "--num-layers", "3", "--hidden-size", "16",
       "--ffn-hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "32",
       "--max-position-embeddings", "32", "--micro-batch-size", "1", "--num-micro-batches",
       "2", "--tensor-model-parallel-size", "2", "--use-distributed-optimizer",
       "--grad-reduce-in-bf16"},
      8);
  ASSERT_EQ(resolved.dp(), 4);
  ASSERT_EQ(resolved.micro_batches(), 2);
  RankMemory only;
  only.parameters = 500;
  only.bucket_padding = 4;
  only.weight_bytes = 2016;
  only.first_stage = true;
  only.last_stage = true;
  only.tp_summed_elements = 10;

  const StepTraffic traffic = PredictStepTraffic(resolved, only);
  EXPECT_EQ(traffic.pipeline, 0.0);  // one stage
  // DP 4: a reduce-scatter of the bf16 gradients (2 x (500 + 4 padding) = 1008 bytes) and
  // an all-gather of the values (2016 bytes), each moving 3/4: 0.75 x 3024.
  EXPECT_DOUBLE_EQ(traffic.data_parallel, 2268.0);
  // TP share 1; per micro-batch (2): 4 x 3 layers plus the embedding's and the output
  // layer's regions, 14 buffers of 32 tokens x 16 x 4 bytes = 2048, and the
  // cross-entropy's 3 doubles per token, 3 x 8 x 32 = 768; then 10 fp32 elements:
  // 2 x (14 x 2048 + 768) + 40.
  EXPECT_DOUBLE_EQ(traffic.tensor_parallel, 58920.0);
  EXPECT_EQ(traffic.context_parallel, 0.0);  // CP 1
}

// The same TP 2 x DP 4 model with one multi-token prediction depth, and under two pipeline
// stages: the depth (on the last stage) runs a fourth layer, and crosses the embedding's
// region, M_k's three activations' worth (its 2-hidden-wide input entering backward, its
// output exiting forward) and the output layer's region again, with a second
// cross-entropy.
TEST(StepTrafficTest, MultiTokenPredictionDepthsOnTheLastStage) {
  const std::vector<std::string> args = {
      "--mock-data", "--vocab-size", "512", "--num-layers", "2", "--hidden-size", "16",
      "--ffn-hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "32",
      "--max-position-embeddings", "32", "--micro-batch-size", "1", "--num-micro-batches", "2",
      "--tensor-model-parallel-size", "2", "--position-embedding-type", "rope",
      "--mtp-num-layers", "1"};
  RankMemory only;
  only.first_stage = true;
  only.last_stage = true;
  // TP share 1, M = 2, buffers of 32 tokens x 16 x 4 bytes = 2048: 4 x (2 + 1) layers, the
  // embedding's region twice, M_k's 3, the output layer's twice (12 + 2 + 3 + 2 = 19
  // buffers) and two cross-entropies of 3 x 8 x 32 = 768 bytes: 2 x (19 x 2048 + 2 x 768).
  EXPECT_DOUBLE_EQ(PredictStepTraffic(Resolved(args, 8), only).tensor_parallel,
                   2.0 * (19 * 2048 + 2 * 768));

  // PP 2 x TP 2: the first stage holds layer 0 and the embedding (2 x (4 + 1) buffers),
  // the last layer 1, the output layer and the depth (2 x ((4 x 2 + 1 + 3 + 2) buffers and
  // two cross-entropies)): the busiest rank is the last.
  std::vector<std::string> pipelined = args;
  pipelined.insert(pipelined.end(), {"--pipeline-model-parallel-size", "2"});
  const ResolvedConfig two_stages = Resolved(pipelined, 4);
  RankMemory first, last;
  first.first_stage = true;
  last.pipeline_rank = 1;
  last.last_stage = true;
  EXPECT_DOUBLE_EQ(PredictStepTraffic(two_stages, first).tensor_parallel,
                   2.0 * (5 * 2048));
  EXPECT_DOUBLE_EQ(PredictBusiestStepTraffic(two_stages, {first, last}).tensor_parallel,
                   2.0 * (14 * 2048 + 2 * 768));
}

// EP 2 over DP 8 (8 ranks, TP 1): the routed experts' gradients are reduced over the
// expert-data-parallel ranks (8 / EP 2 = 4), the rest over all 8.
TEST(StepTrafficTest, ExpertsReduceOverTheirOwnDataParallelRanks) {
  const std::vector<std::string> expert_args = {
      "--mock-data", "--vocab-size", "512", "--num-layers", "2", "--hidden-size", "16",
      "--num-attention-heads", "4", "--seq-length", "32", "--micro-batch-size", "1",
      "--num-micro-batches", "1", "--num-experts", "4", "--moe-ffn-hidden-size", "32",
      "--expert-model-parallel-size", "2", "--disable-bias-linear"};
  const ResolvedConfig resolved = Resolved(expert_args, 8);
  ASSERT_EQ(resolved.dp(), 8);
  RankMemory only;
  only.parameters = 8192;
  only.first_stage = true;
  only.last_stage = true;

  const StepTraffic traffic = PredictStepTraffic(resolved, only);
  // A rank holds 4 / EP 2 = 2 experts per layer, each 16 x 32 in and 32 x 16 out (1024
  // elements): 2 layers x 2 x 1024 = 4096 of its 8192 parameters, a share of 1/2. fp32
  // gradients (32768 bytes) all-reduced by a ring: 2 x 7/8 over the 8 replicas of the
  // dense half, 2 x 3/4 over the 4 of the experts' half:
  // 0.5 x 57344 + 0.5 x 49152.
  EXPECT_DOUBLE_EQ(traffic.data_parallel, 53248.0);
  EXPECT_EQ(traffic.tensor_parallel, 0.0);  // TP 1
  EXPECT_EQ(traffic.pipeline, 0.0);
  EXPECT_EQ(traffic.context_parallel, 0.0);

  // --moe-router-load-balancing-type global_aux_loss: each MoE layer's router all-reduces
  // 2 x 4 experts' doubles (64 bytes) over the 8 DP ranks per micro-batch (M = 1), a
  // ring's 2 x 7/8 of them: 2 layers x 112 bytes more.
  std::vector<std::string> aux_args = expert_args;
  aux_args.insert(aux_args.end(), {"--moe-router-load-balancing-type", "global_aux_loss",
                                   "--moe-aux-loss-coeff", "0.01"});
  EXPECT_DOUBLE_EQ(PredictStepTraffic(Resolved(aux_args, 8), only).data_parallel,
                   53248.0 + 224.0);
}

}  // namespace
}  // namespace conveyor
