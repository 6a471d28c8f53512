// Every backend trains the model the CPU fp32 reference trains: the same loss curve over
// 20 steps (tightly for fp32 on a GPU, within bf16 rounding under --bf16), an exact resume
// from a checkpoint (through the host staging of device tensors and the refresh of the
// bf16 weight copies), and bf16 weight copies equal to their rounded master weights.
// The CPU's bf16 runs everywhere (its GEMMs on AVX-512 BF16 where the CPU has it, else
// emulated); the CUDA cases skip without a GPU.
#include <cmath>
#include <string>
#include <vector>

#include "data/mock_dataset.h"
#include "gtest/gtest.h"
#include "parallel/parallel_state.h"
#include "runtime/cuda/device.h"
#include "runtime/dtype.h"
#include "tests/runtime/skip_without_gpu.h"
#include "tests/util/test_dirs.h"
#include "trainer/backend.h"
#include "trainer/config/config_validation.h"
#include "trainer/rank_training.h"

namespace conveyor {
namespace {

constexpr int kSteps = 20;

struct BackendCase {
  std::string device;
  bool bf16;
  double loss_tolerance;  // relative, per step, against the CPU fp32 run
};

std::string CaseName(const ::testing::TestParamInfo<BackendCase>& info) {
  return info.param.device + (info.param.bf16 ? "_bf16" : "_fp32");
}

class BackendTrainingTest : public ::testing::TestWithParam<BackendCase> {
 protected:
  void SetUp() override {
    if (GetParam().device == "cuda") SKIP_WITHOUT_GPU("GPU training");
  }
};

// configs/gpt-tiny.textproto's model (biases, learned positions, tied embeddings, GELU)
// on mock data.
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
  // A failing kernel is then reported with its op's name.
  c.mutable_parallel()->set_cuda_synchronize_each_op(device == "cuda");
  c.mutable_precision()->set_bf16(bf16);
  absl::StatusOr<Config> resolved = ResolveConfig(c, 1);
  EXPECT_TRUE(resolved.ok()) << resolved.status();
  return *resolved;
}

Config TinyGpt(const BackendCase& backend) { return TinyGpt(backend.device, backend.bf16); }

RankRun TrainOn(const Config& config) {
  absl::StatusOr<ResolvedConfig> resolved = ResolvedConfig::Resolve(config, 1);
  EXPECT_TRUE(resolved.ok()) << resolved.status();
  if (!resolved.ok()) return {};
  absl::StatusOr<Backend> backend = StartBackend(*resolved, /*local_rank=*/0);
  EXPECT_TRUE(backend.ok()) << backend.status();
  if (!backend.ok()) return {};
  std::unique_ptr<ParallelState> state = ParallelState::SingleProcess(backend->transport);
  const MockSampleSource data(config.training().seed(), config.model().vocab_size(),
                              config.model().seq_length());
  absl::StatusOr<RankRun> run = TrainOnRank(*resolved, *state, data, {}, {}, *backend);
  EXPECT_TRUE(run.ok()) << run.status();
  return run.ok() ? std::move(*run) : RankRun();
}

const TrainingResult& CpuFp32Reference() {
  static const TrainingResult* reference =
      new TrainingResult(TrainOn(TinyGpt("cpu", false)).result);
  return *reference;
}

TEST_P(BackendTrainingTest, FollowsTheCpuFp32LossCurve) {
  const TrainingResult& want = CpuFp32Reference();
  const TrainingResult got = TrainOn(TinyGpt(GetParam())).result;
  const double tolerance = GetParam().loss_tolerance;
  ASSERT_EQ(got.losses.size(), want.losses.size());
  for (size_t i = 0; i < want.losses.size(); ++i) {
    ASSERT_TRUE(std::isfinite(got.losses[i]) && std::isfinite(got.grad_norms[i]))
        << "step " << i + 1 << ": loss " << got.losses[i] << ", grad norm " << got.grad_norms[i];
    EXPECT_NEAR(got.losses[i], want.losses[i], tolerance * want.losses[i]) << "step " << i + 1;
    EXPECT_NEAR(got.grad_norms[i], want.grad_norms[i], 5 * tolerance * want.grad_norms[i])
        << "grad norm, step " << i + 1;
  }
  EXPECT_LT(got.losses.back(), got.losses.front() - 1.0) << "the run did not learn";
}

// --qk-layernorm (the heads' norms, their gathers and scatters on the backend) with
// RMSNorm and RoPE, as Qwen3 and OLMo 2 use it: the same curve as the CPU fp32 run.
TEST_P(BackendTrainingTest, QkLayerNormFollowsTheCpuFp32LossCurve) {
  auto with_qk_norm = [](Config c) {
    c.mutable_model()->set_qk_layernorm(true);
    c.mutable_model()->set_normalization("RMSNorm");
    c.mutable_model()->set_position_embedding_type("rope");
    return c;
  };
  static const TrainingResult* want =
      new TrainingResult(TrainOn(with_qk_norm(TinyGpt("cpu", false))).result);
  const TrainingResult got = TrainOn(with_qk_norm(TinyGpt(GetParam()))).result;
  const double tolerance = GetParam().loss_tolerance;
  ASSERT_EQ(got.losses.size(), want->losses.size());
  for (size_t i = 0; i < want->losses.size(); ++i) {
    EXPECT_NEAR(got.losses[i], want->losses[i], tolerance * want->losses[i]) << "step " << i + 1;
  }
  EXPECT_LT(got.losses.back(), got.losses.front() - 1.0) << "the run did not learn";
}

TEST_P(BackendTrainingTest, ResumesFromACheckpointExactly) {
  const std::string dir =
      testing_util::FreshDir("resume_" + GetParam().device + (GetParam().bf16 ? "_bf16" : "_fp32"));
  const Config whole = TinyGpt(GetParam());
  const TrainingResult straight = TrainOn(whole).result;

  Config first = whole;
  first.mutable_checkpoint()->set_save(dir);
  first.mutable_checkpoint()->set_exit_interval(kSteps / 2);
  ASSERT_EQ(TrainOn(first).result.losses.size(), kSteps / 2);

  Config second = whole;
  second.mutable_checkpoint()->set_load(dir);
  const TrainingResult rest = TrainOn(second).result;
  ASSERT_EQ(rest.losses.size(), kSteps / 2);
  for (int i = 0; i < kSteps / 2; ++i) {
    EXPECT_EQ(rest.losses[i], straight.losses[kSteps / 2 + i]) << "step " << kSteps / 2 + i + 1;
  }
}

TEST_P(BackendTrainingTest, Bf16WeightCopiesAreTheRoundedMasterWeights) {
  if (!GetParam().bf16) GTEST_SKIP() << "fp32: the GEMMs read the master weights";
  const RankRun run = TrainOn(TinyGpt(GetParam()));
  ASSERT_NE(run.stage, nullptr);
  int copies = 0;
  for (const Parameter* p : run.stage->parameters()) {
    if (!p->read_in_compute_type) {
      EXPECT_TRUE(p->compute.empty()) << p->name;
      continue;
    }
    ++copies;
    ASSERT_EQ(p->compute.dtype(), DType::kBFloat16) << p->name;
    const Tensor master = p->value.To(Device::kCpu, MemoryCategory::kOther);
    const Tensor copy = p->compute.To(Device::kCpu, MemoryCategory::kOther);
    const auto* bits = static_cast<const BFloat16*>(copy.raw());
    for (int64_t i = 0; i < master.numel(); ++i) {
      ASSERT_EQ(bits[i].bits, ToBFloat16(master.data()[i]).bits) << p->name << "[" << i << "]";
    }
  }
  EXPECT_EQ(copies, 2 * 4 + 1);  // qkv, proj, fc1, fc2 per layer; the tied output weight
}

INSTANTIATE_TEST_SUITE_P(Backends, BackendTrainingTest,
                         ::testing::Values(
                             // bf16 keeps 8 significant bits: ~0.4% per rounding.
                             BackendCase{"cpu", true, 3e-2},
                             // Only summation orders differ (cuBLASLt, flash attention).
                             BackendCase{"cuda", false, 1e-3}, BackendCase{"cuda", true, 3e-2}),
                         CaseName);

}  // namespace
}  // namespace conveyor
