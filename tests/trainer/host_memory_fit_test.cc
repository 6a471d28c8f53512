// A CPU run is refused before it starts when the memory model's peak for the ranks on
// this machine exceeds the memory the process may use; the sum follows each rank's
// pipeline stage.
#include "trainer/planning/host_memory_fit.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/memory_model.h"
#include "trainer/config/config_validation.h"
#include "trainer/config/flags.h"
#include "trainer/config/resolved_config.h"
#include "trainer/planning/pipeline_report.h"

namespace conveyor {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// PP 2 x DP 2 of a small model: the stages hold different activations under 1F1B.
struct PlannedRun {
  ResolvedConfig config;
  ModelShape shape;
  std::vector<RankMemory> stages;
};

PlannedRun MakeRun(const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {"--mock-data",
                                   "--num-layers",
                                   "4",
                                   "--hidden-size",
                                   "64",
                                   "--num-attention-heads",
                                   "4",
                                   "--seq-length",
                                   "32",
                                   "--vocab-size",
                                   "512",
                                   "--micro-batch-size",
                                   "2",
                                   "--global-batch-size",
                                   "16",
                                   "--pipeline-model-parallel-size",
                                   "2"};
  args.insert(args.end(), extra.begin(), extra.end());
  absl::StatusOr<Config> parsed = ParseFlags(args);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  absl::StatusOr<ResolvedConfig> resolved = ResolvedConfig::Resolve(*parsed, 4);
  EXPECT_TRUE(resolved.ok()) << resolved.status();
  PlannedRun run{*resolved, resolved->model_shape(), {}};
  absl::StatusOr<BubblePrediction> bubble = PredictBubble(run.config);
  EXPECT_TRUE(bubble.ok()) << bubble.status();
  absl::StatusOr<std::vector<RankMemory>> stages =
      PredictMemory(MemoryInputsOf(run.config), run.shape, bubble->simulation.timeline);
  EXPECT_TRUE(stages.ok()) << stages.status();
  run.stages = *stages;
  return run;
}

TEST(HostMemoryFitTest, SumsTheStageOfEveryRankOnTheHost) {
  const PlannedRun run = MakeRun();
  ASSERT_EQ(run.stages.size(), 2u);
  const int64_t first = run.stages[0].total_bytes(), last = run.stages[1].total_bytes();
  ASSERT_NE(first, last);  // 1F1B stashes more on the first stage
  // Ranks 0, 1 (DP 0 and 1) are stage 0; ranks 2, 3 stage 1.
  EXPECT_EQ(*PredictedHostBytes(run.config, {0, 4}), 2 * first + 2 * last);
  EXPECT_EQ(*PredictedHostBytes(run.config, {0, 2}), 2 * first);
  EXPECT_EQ(*PredictedHostBytes(run.config, {2, 2}), 2 * last);
  EXPECT_EQ(*PredictedHostBytes(run.config, {1, 2}), first + last);
  EXPECT_EQ(*PredictedHostBytes(run.config, {3, 1}), last);
}

// No memory before the first tensor: the model's figures alone.
const StartupMemory kNoStartup = {0, "nothing before any tensor"};

TEST(HostMemoryFitTest, RefusesAPredictionAboveTheLimitNamingBoth) {
  const PlannedRun run = MakeRun();
  const int64_t predicted = *PredictedHostBytes(run.config, {0, 4});
  const HostMemoryLimit limit{predicted - 1, "the cgroup limit /sys/fs/cgroup/job/memory.max"};
  const absl::Status refused =
      CheckRunFitsHostMemory(run.config, {0, 4}, kNoStartup, limit);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.message(),
              AllOf(HasSubstr("the 4 ranks on this machine are predicted to need " +
                              FormatMemorySize(predicted) + " of host memory"),
                    HasSubstr("this process may use " + FormatMemorySize(predicted - 1) +
                              " (the cgroup limit /sys/fs/cgroup/job/memory.max)"),
                    HasSubstr("nothing was started"), HasSubstr("--recompute-granularity")));
  EXPECT_TRUE(CheckRunFitsHostMemory(run.config, {0, 4}, kNoStartup,
                                     {predicted, "physical memory"})
                  .ok());
}

// A process of the trainer holds about 260 MB before its first tensor (the program, its
// libraries, heaps, BLAS buffers): a limit the model alone fits under, but not with
// that, used to pass, and the kernel then killed the rank. Figures as measured for one
// CPU rank: VmHWM 277 MB of which 112 MB anonymous.
TEST(HostMemoryFitTest, CountsWhatTheProcessesHoldBeforeAnyTensor) {
  const PlannedRun run = MakeRun();
  const ProcessMemory self{int64_t{277} << 20, int64_t{112} << 20};
  const int64_t predicted = *PredictedHostBytes(run.config, {0, 1});
  const HostMemoryLimit limit{predicted + (int64_t{100} << 20), "the cgroup limit memory.max"};
  ASSERT_TRUE(CheckRunFitsHostMemory(run.config, {0, 1}, kNoStartup, limit).ok());

  const StartupMemory one = RanksStartupMemory(self, {0, 1}, /*own_processes=*/false, 16);
  EXPECT_EQ(one.bytes, (int64_t{277} << 20) + kRankPrivateBytes + 16 * kBlasBytesPerThread);
  const absl::Status refused = CheckRunFitsHostMemory(run.config, {0, 1}, one, limit);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(
      refused.message(),
      AllOf(HasSubstr("this rank is predicted to need " + FormatMemorySize(predicted + one.bytes)),
            HasSubstr(FormatMemorySize(predicted) + " for the model and its activations"),
            HasSubstr(FormatMemorySize(one.bytes) + " before any tensor"),
            HasSubstr("this process may use " + FormatMemorySize(limit.bytes))));
  // The line --dry-run prints says the same.
  EXPECT_THAT(HostMemoryLine(run.config, {0, 1}, one, limit),
              HasSubstr(FormatMemorySize(predicted + one.bytes) + " predicted (of which " +
                        FormatMemorySize(one.bytes) + " before any tensor)"));
}

// Forked ranks (the built-in launcher) share the launching process's pages copy on
// write; ranks that are programs of their own (torchrun, srun) each hold their heap.
// Mapped files (the program, its libraries) are counted once either way.
TEST(HostMemoryFitTest, StartupMemoryGrowsWithRanksAndBlasThreads) {
  const ProcessMemory self{int64_t{277} << 20, int64_t{112} << 20};
  const int64_t files = int64_t{165} << 20, heap = int64_t{112} << 20;
  const int64_t rank = kRankPrivateBytes + 4 * kBlasBytesPerThread;
  EXPECT_EQ(RanksStartupMemory(self, {0, 4}, /*own_processes=*/false, 4).bytes,
            files + heap + 4 * rank);
  EXPECT_EQ(RanksStartupMemory(self, {0, 4}, /*own_processes=*/true, 4).bytes,
            files + 4 * heap + 4 * rank);
  EXPECT_EQ(RanksStartupMemory(self, {0, 1}, false, 64).bytes -
                RanksStartupMemory(self, {0, 1}, false, 1).bytes,
            63 * kBlasBytesPerThread);
}

TEST(HostMemoryFitTest, DryRunSaysWhatTheRanksOnThisMachineNeedAndMayUse) {
  const PlannedRun run = MakeRun();
  const int64_t predicted = *PredictedHostBytes(run.config, {2, 2});
  const StartupMemory startup = {int64_t{300} << 20, "300.0 MiB before any tensor"};
  EXPECT_EQ(HostMemoryLine(run.config, {2, 2}, startup,
                           {int64_t{16} << 30, "physical memory"}),
            "plan: host memory of the 2 ranks on this machine: " +
                FormatMemorySize(predicted + startup.bytes) +
                " predicted (of which 300.0 MiB before any tensor), 16.0 GiB usable (physical "
                "memory)\n");
}

// Under an external launcher the world size comes from WORLD_SIZE, not from
// --nproc-per-node: the prediction follows the resolved DP either way (it once took DP
// from the flags alone, and predicted an unsharded optimizer on every srun rank).
TEST(HostMemoryFitTest, TheDistributedOptimizerIsShardedOverTheResolvedDataParallelSize) {
  const PlannedRun srun = MakeRun({"--use-distributed-optimizer"});
  const PlannedRun forked = MakeRun({"--use-distributed-optimizer", "--nproc-per-node", "4"});
  ASSERT_EQ(srun.config.dp(), 2);
  EXPECT_EQ(srun.stages[0].optimizer_bytes, forked.stages[0].optimizer_bytes);
  EXPECT_EQ(*PredictedHostBytes(srun.config, {0, 4}),
            *PredictedHostBytes(forked.config, {0, 4}));
  // Adam's two fp32 moments for half the stage's parameters (in fp32 the parameters'
  // own buffer is the master copy).
  const int64_t params = srun.stages[0].parameters;
  EXPECT_EQ(srun.stages[0].optimizer_bytes, (params + 1) / 2 * 8);
}

TEST(HostMemoryFitTest, TheGpuBackendKeepsItsModelOffTheHost) {
  const PlannedRun run = MakeRun({"--device", "cuda"});
  EXPECT_TRUE(
      CheckRunFitsHostMemory(run.config, {0, 4}, kNoStartup, {1, "physical memory"})
          .ok());
  EXPECT_EQ(HostMemoryLine(run.config, {0, 4}, kNoStartup, {1, "physical memory"}), "");
}

}  // namespace
}  // namespace conveyor
