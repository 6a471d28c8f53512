// The CUDA backend trains the model the CPU backend trains: the same loss curve over
// 20 steps (tightly in fp32, within bf16 rounding in bf16), and an exact resume from a
// checkpoint (through the host staging of device tensors). Needs a GPU; without one
// every test skips with the reason.
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "data/mock_dataset.h"
#include "gtest/gtest.h"
#include "parallel/parallel_state.h"
#include "runtime/cuda/device.h"
#include "trainer/backend.h"
#include "trainer/config_validation.h"
#include "trainer/rank_training.h"

namespace conveyor {
namespace {

constexpr int kSteps = 20;

class GpuTrainingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const GpuInfo info = ProbeGpus();
    if (info.count == 0) {
      GTEST_SKIP() << "no CUDA device: " << DescribeBackend(info)
                   << "; run on a GPU machine to check GPU training";
    }
  }
};

// configs/gpt-tiny.textproto's model (with biases, learned positions, tied embeddings,
// GELU) on mock data, on `device`.
Config TinyGpt(const std::string& device, bool bf16) {
  Config c;
  c.mutable_model()->set_num_layers(2);
  c.mutable_model()->set_hidden_size(128);
  c.mutable_model()->set_num_attention_heads(4);
  c.mutable_model()->set_seq_length(64);
  c.mutable_model()->set_vocab_size(512);
  c.mutable_model()->set_hidden_dropout(0);
  c.mutable_model()->set_attention_dropout(0);
  c.mutable_training()->set_micro_batch_size(4);
  c.mutable_training()->set_num_micro_batches(2);
  c.mutable_training()->set_train_iters(kSteps);
  c.mutable_optimizer()->set_lr(3e-3);
  c.mutable_optimizer()->set_lr_warmup_iters(5);
  c.mutable_data()->set_mock_data(true);
  c.mutable_parallel()->set_device(device);
  c.mutable_precision()->set_bf16(bf16);
  absl::StatusOr<Config> resolved = ResolveConfig(c, 1);
  EXPECT_TRUE(resolved.ok()) << resolved.status();
  return *resolved;
}

TrainingResult TrainOn(const Config& config) {
  absl::StatusOr<Backend> backend = StartBackend(config, /*local_rank=*/0);
  EXPECT_TRUE(backend.ok()) << backend.status();
  if (!backend.ok()) return {};
  std::unique_ptr<ParallelState> state = ParallelState::SingleProcess();
  const MockSampleSource data(config.training().seed(), config.model().vocab_size(),
                              config.model().seq_length());
  absl::StatusOr<RankRun> run = TrainOnRank(config, *state, data, {}, nullptr, *backend);
  EXPECT_TRUE(run.ok()) << run.status();
  return run.ok() ? run->result : TrainingResult();
}

// Every step's loss and gradient norm within `relative` of the CPU run's; never NaN.
void ExpectCurvesClose(const TrainingResult& gpu, const TrainingResult& cpu, double relative) {
  ASSERT_EQ(gpu.losses.size(), cpu.losses.size());
  for (size_t i = 0; i < cpu.losses.size(); ++i) {
    ASSERT_TRUE(std::isfinite(gpu.losses[i]) && std::isfinite(gpu.grad_norms[i]))
        << "step " << i + 1 << ": loss " << gpu.losses[i] << ", grad norm " << gpu.grad_norms[i];
    EXPECT_NEAR(gpu.losses[i], cpu.losses[i], relative * cpu.losses[i]) << "step " << i + 1;
    EXPECT_NEAR(gpu.grad_norms[i], cpu.grad_norms[i], 5 * relative * cpu.grad_norms[i])
        << "grad norm, step " << i + 1;
  }
}

TEST_F(GpuTrainingTest, Fp32MatchesTheCpuLossCurve) {
  const TrainingResult cpu = TrainOn(TinyGpt("cpu", false));
  const TrainingResult gpu = TrainOn(TinyGpt("cuda", false));
  // Only summation orders differ (cuBLASLt, flash attention, reductions).
  ExpectCurvesClose(gpu, cpu, 1e-3);
}

TEST_F(GpuTrainingTest, Bf16FollowsTheCpuLossCurve) {
  const TrainingResult cpu = TrainOn(TinyGpt("cpu", false));
  const TrainingResult gpu = TrainOn(TinyGpt("cuda", true));
  // bf16 keeps 8 bits of mantissa: activations and GEMM inputs round at ~0.4%.
  ExpectCurvesClose(gpu, cpu, 3e-2);
  EXPECT_LT(gpu.losses.back(), gpu.losses.front() - 1.0) << "bf16 run did not learn";
}

TEST_F(GpuTrainingTest, Bf16ResumeFromCheckpointIsExact) {
  const std::string dir = ::testing::TempDir() + "/gpu_resume";
  std::system(("rm -rf " + dir).c_str());
  Config whole = TinyGpt("cuda", true);
  const TrainingResult straight = TrainOn(whole);

  Config first = whole;
  first.mutable_checkpoint()->set_save(dir);
  first.mutable_checkpoint()->set_exit_interval(kSteps / 2);
  const TrainingResult half = TrainOn(first);
  ASSERT_EQ(half.losses.size(), kSteps / 2);

  Config second = whole;
  second.mutable_checkpoint()->set_load(dir);
  const TrainingResult rest = TrainOn(second);
  ASSERT_EQ(rest.losses.size(), kSteps / 2);
  for (int i = 0; i < kSteps / 2; ++i) {
    EXPECT_EQ(rest.losses[i], straight.losses[kSteps / 2 + i]) << "step " << kSteps / 2 + i + 1;
  }
}

}  // namespace
}  // namespace conveyor
