// --dry-run's plan: the pipeline traffic of a step, against the arithmetic done here.
#include "trainer/plan.h"

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/model_shape.h"
#include "trainer/config_validation.h"
#include "trainer/flags.h"

namespace conveyor {
namespace {

using ::testing::HasSubstr;

constexpr int kMicroBatch = 4, kSeq = 128, kHidden = 128, kTp = 2, kPp = 2, kM = 4, kV = 2;

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
  absl::StatusOr<Config> parsed = ParseFlags(args);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  absl::StatusOr<ResolvedConfig> config = ResolvedConfig::Resolve(*parsed, kTp * kPp);
  EXPECT_TRUE(config.ok()) << config.status();
  absl::StatusOr<std::string> plan =
      FormatPlan(*config, ModelShapeFromConfig(config->config(), config->padded_vocab_size()));
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *plan : "";
}

// Activations forward and gradients back, fp32, for every micro-batch and chunk.
std::string PipelineTraffic(int tokens_per_rank) {
  const double bytes = 1.0 * kMicroBatch * tokens_per_rank * kHidden * 4 * 2 * kM * kV;
  return absl::StrFormat("pipeline %.2f MiB,", bytes / (1024 * 1024));
}

TEST(PlanTest, PipelineTrafficMovesWholeActivations) {
  EXPECT_THAT(Plan({}), HasSubstr(PipelineTraffic(kSeq)));  // 4.00 MiB
}

TEST(PlanTest, PipelineTrafficUnderSequenceParallelismMovesTheTokenShard) {
  EXPECT_THAT(Plan({"--sequence-parallel"}), HasSubstr(PipelineTraffic(kSeq / kTp)));  // 2.00
}

}  // namespace
}  // namespace conveyor
