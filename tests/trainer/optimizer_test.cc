// Gradient norm, clipping, and the optimizer's use of the weight-decay exclusions.
#include "trainer/optimizer.h"

#include <cmath>

#include "gtest/gtest.h"
#include "runtime/cpu/cpu_optimizer_ops.h"
#include "trainer/parameter_updater.h"

namespace conveyor {
namespace {

class OptimizerTest : public ::testing::Test {
 protected:
  OptimizerTest() : store_(1) {
    weight_ = store_.Add("w", {2}, {InitKind::kOnes}, /*weight_decay=*/true);
    bias_ = store_.Add("b", {1}, {InitKind::kOnes}, /*weight_decay=*/false);
    weight_->grad.data()[0] = 3.0f;
    weight_->grad.data()[1] = 0.0f;
    bias_->grad.data()[0] = 4.0f;
  }
  ParameterStore store_;
  Parameter* weight_;
  Parameter* bias_;
};

TEST_F(OptimizerTest, GlobalNormCoversEveryParameter) {
  Config config;
  for (bool distributed : {false, true}) {
    config.mutable_parallel()->set_use_distributed_optimizer(distributed);
    const RankContext one_rank = RankContext::SingleProcess();
    std::unique_ptr<ParameterUpdater> u =
        MakeParameterUpdater(config, one_rank, {store_.parameters(), {}}, &CpuOptimizerOps::Get());
    ASSERT_TRUE(u->ReduceGradients().ok());
    EXPECT_DOUBLE_EQ(*u->GradNorm(), 5.0);
    EXPECT_DOUBLE_EQ(*u->ParamsNorm(), std::sqrt(3.0));  // w = (1, 1), b = 1
    EXPECT_EQ(*u->GradZeros(), 1);                        // w's second gradient
  }
}

// Under bf16 the distributed optimizer keeps a GEMM weight's fp32 values only in its
// master shard: the parameter norm reads them there.
TEST_F(OptimizerTest, ParamsNormReadsTheBf16MasterShard) {
  weight_->read_in_compute_type = true;
  weight_->compute = Tensor::Zeros({2}, MemoryCategory::kWeights, DType::kBFloat16);
  weight_->value.data()[1] = 2.0f;
  Config config;
  config.mutable_parallel()->set_use_distributed_optimizer(true);
  const RankContext one_rank = RankContext::SingleProcess();
  std::unique_ptr<ParameterUpdater> u =
      MakeParameterUpdater(config, one_rank, {store_.parameters(), {}}, &CpuOptimizerOps::Get());
  EXPECT_TRUE(weight_->value.empty());
  EXPECT_DOUBLE_EQ(*u->ParamsNorm(), std::sqrt(1.0 + 4.0 + 1.0));
  // The bf16 copy is the master rounded, after the gather that follows a load.
  ASSERT_TRUE(u->ParametersLoaded().ok());
  EXPECT_EQ(ToFloat(static_cast<const BFloat16*>(weight_->compute.raw())[1]), 2.0f);
}

TEST_F(OptimizerTest, ClippingScalesToMaxNormOnlyWhenAbove) {
  ClipGradients(CpuOptimizerOps::Get(), WholeParameterSegments(store_.parameters()), 5.0, 10.0);
  EXPECT_FLOAT_EQ(weight_->grad.data()[0], 3.0f);
  ClipGradients(CpuOptimizerOps::Get(), WholeParameterSegments(store_.parameters()), 5.0, 1.0);
  EXPECT_NEAR(weight_->grad.data()[0], 3.0 / (5.0 + 1e-6), 1e-6);
  double squares = 0.0;
  for (Parameter* p : store_.parameters()) {
    for (int64_t i = 0; i < p->grad.numel(); ++i) squares += p->grad.data()[i] * p->grad.data()[i];
  }
  EXPECT_NEAR(std::sqrt(squares), 1.0, 1e-5);
}

TEST_F(OptimizerTest, WeightDecaySkipsExcludedParameters) {
  OptimizerConfig c;
  c.set_weight_decay(0.5f);
  weight_->grad.SetZero();
  bias_->grad.SetZero();
  Optimizer adam(c, WholeParameterSegments(store_.parameters()), &CpuOptimizerOps::Get());
  adam.Step(0.1);
  // Zero gradient: only decoupled decay moves the weight, by a factor 1 - lr * wd.
  EXPECT_FLOAT_EQ(weight_->value.data()[0], 0.95f);
  EXPECT_FLOAT_EQ(bias_->value.data()[0], 1.0f);
}

TEST_F(OptimizerTest, SgdWithMomentumMatchesTorch) {
  OptimizerConfig c;
  c.set_optimizer("sgd");
  c.set_weight_decay(0.0f);
  c.set_sgd_momentum(0.5f);
  Optimizer sgd(c, WholeParameterSegments(store_.parameters()), &CpuOptimizerOps::Get());
  sgd.Step(0.1);  // buf = g = 4, p = 1 - 0.4
  EXPECT_FLOAT_EQ(bias_->value.data()[0], 0.6f);
  sgd.Step(0.1);  // buf = 0.5 * 4 + 4 = 6, p = 0.6 - 0.6
  EXPECT_NEAR(bias_->value.data()[0], 0.0f, 1e-7);
}

}  // namespace
}  // namespace conveyor
