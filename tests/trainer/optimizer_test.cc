// Gradient norm, clipping, and the optimizer's use of the weight-decay exclusions.
#include "trainer/optimization/optimizer.h"

#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/gpt_model.h"
#include "runtime/cpu/cpu_ops.h"
#include "runtime/cpu/cpu_optimizer_ops.h"
#include "trainer/config/resolved_config.h"
#include "trainer/optimization/lr_schedule.h"
#include "trainer/optimization/parameter_updater.h"

namespace conveyor {
namespace {

// `config` on mock data of a 64-token vocabulary, resolved for one rank: what the
// updaters take.
ResolvedConfig ForOneRank(Config config) {
  config.mutable_data()->set_mock_data(true);
  config.mutable_model()->set_vocab_size(64);
  absl::StatusOr<ResolvedConfig> resolved = ResolvedConfig::Resolve(config, 1);
  EXPECT_TRUE(resolved.ok()) << resolved.status();
  return *std::move(resolved);
}

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
        MakeParameterUpdater(ForOneRank(config), one_rank, {store_.parameters(), {}},
                             &CpuOptimizerOps::Get());
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
      MakeParameterUpdater(ForOneRank(config), one_rank, {store_.parameters(), {}},
                           &CpuOptimizerOps::Get());
  EXPECT_TRUE(weight_->value.empty());
  EXPECT_DOUBLE_EQ(*u->ParamsNorm(), std::sqrt(1.0 + 4.0 + 1.0));
  // The bf16 copy is the master rounded, after the gather that follows a load.
  ASSERT_TRUE(u->ParametersLoaded().ok());
  EXPECT_EQ(ToFloat(static_cast<const BFloat16*>(weight_->compute.raw())[1]), 2.0f);
}

TEST(ClipCoefficientTest, MegatronsFactorOnlyWhenTheNormIsAbove) {
  EXPECT_EQ(ClipCoefficient(5.0, 10.0), 1.0);
  EXPECT_DOUBLE_EQ(ClipCoefficient(5.0, 1.0), 1.0 / (5.0 + 1e-6));
  EXPECT_EQ(ClipCoefficient(5.0, 0.0), 1.0);  // --clip-grad 0: no clipping
}

// Megatron clips by scaling every gradient in place, float(g * coeff) with the product in
// double, before the optimizer's step; Optimizer::Step takes the factor instead. Both
// optimizers must land on the same bits as the in-place scaling, over two steps.
TEST(ClipCoefficientTest, StepWithTheFactorIsTheStepOnGradientsScaledInPlace) {
  const std::vector<float> grads = {3.0f, -0.7f, 1e-3f, 0.0f, 123.456f};
  const double coeff = ClipCoefficient(/*norm=*/7.3, /*max_norm=*/1.0);
  for (const OptimizerKind kind : {OptimizerKind::kAdam, OptimizerKind::kSgd}) {
    ParameterStore folded(1), in_place(1);
    Parameter* a = folded.Add("w", {5}, {InitKind::kOnes}, /*weight_decay=*/true);
    Parameter* b = in_place.Add("w", {5}, {InitKind::kOnes}, /*weight_decay=*/true);
    OptimizerConfig c;
    c.set_weight_decay(0.1f);
    c.set_sgd_momentum(0.9f);
    Optimizer with_factor(c, kind, WholeParameterSegments(folded.parameters()),
                          &CpuOptimizerOps::Get());
    Optimizer on_scaled(c, kind, WholeParameterSegments(in_place.parameters()),
                        &CpuOptimizerOps::Get());
    for (int step = 0; step < 2; ++step) {
      for (int i = 0; i < 5; ++i) {
        a->grad.data()[i] = grads[i];
        b->grad.data()[i] = static_cast<float>(static_cast<double>(grads[i]) * coeff);
      }
      with_factor.Step({0.1, 0.1}, coeff);
      on_scaled.Step({0.1, 0.1});
    }
    for (int i = 0; i < 5; ++i) {
      EXPECT_EQ(a->value.data()[i], b->value.data()[i]) << "element " << i;
      EXPECT_NE(a->value.data()[i], 1.0f) << "element " << i << " never moved";
    }
  }
}

TEST_F(OptimizerTest, WeightDecaySkipsExcludedParameters) {
  OptimizerConfig c;
  c.set_weight_decay(0.5f);
  weight_->grad.SetZero();
  bias_->grad.SetZero();
  Optimizer adam(c, OptimizerKind::kAdam, WholeParameterSegments(store_.parameters()),
                 &CpuOptimizerOps::Get());
  adam.Step({0.1, 0.1});
  // Zero gradient: only decoupled decay moves the weight, by a factor 1 - lr * wd.
  EXPECT_FLOAT_EQ(weight_->value.data()[0], 0.95f);
  EXPECT_FLOAT_EQ(bias_->value.data()[0], 1.0f);
}

TEST_F(OptimizerTest, SgdWithMomentumMatchesTorch) {
  OptimizerConfig c;
  c.set_optimizer("sgd");
  c.set_weight_decay(0.0f);
  c.set_sgd_momentum(0.5f);
  Optimizer sgd(c, OptimizerKind::kSgd, WholeParameterSegments(store_.parameters()),
                &CpuOptimizerOps::Get());
  sgd.Step({0.1, 0.1});  // buf = g = 4, p = 1 - 0.4
  EXPECT_FLOAT_EQ(bias_->value.data()[0], 0.6f);
  sgd.Step({0.1, 0.1});  // buf = 0.5 * 4 + 4 = 6, p = 0.6 - 0.6
  EXPECT_NEAR(bias_->value.data()[0], 0.0f, 1e-7);
}

ModelShape DecoupledShape(bool tied) {
  ModelShape s;
  s.num_layers = 1;
  s.hidden = 8;
  s.heads = 2;
  s.query_groups = 2;
  s.head_dim = 4;
  s.ffn_hidden = 16;
  s.seq = 4;
  s.max_positions = 4;
  s.padded_vocab = 16;
  s.tied_embeddings = tied;
  return s;
}

std::set<std::string> EmbeddingOrOutput(GptModel& model) {
  std::set<std::string> names;
  for (const Parameter* p : model.parameters().parameters()) {
    if (p->embedding_or_output) names.insert(p->name);
  }
  return names;
}

// Megatron's is_embedding_or_output_parameter (LanguageModule.
// setup_embeddings_and_output_layer): the word embedding on the first stage, the output
// layer's weight on the last, which for a tied model is the embedding's copy; never the
// position embedding.
TEST(DecoupledLrTest, EmbeddingAndOutputWeightsFormTheGroup) {
  const TensorParallel one_rank;
  GptModel untied(&CpuOps::Get(), DecoupledShape(false), 3, &one_rank);
  EXPECT_EQ(EmbeddingOrOutput(untied),
            (std::set<std::string>{kWordEmbeddingName, "output_layer.weight"}));
  GptModel tied(&CpuOps::Get(), DecoupledShape(true), 3, &one_rank);
  EXPECT_EQ(EmbeddingOrOutput(tied), (std::set<std::string>{kWordEmbeddingName}));
  ModelPartition last_stage;
  last_stage.has_embedding = false;
  GptModel tied_head(&CpuOps::Get(), DecoupledShape(true), 3, &one_rank, last_stage);
  EXPECT_EQ(EmbeddingOrOutput(tied_head), (std::set<std::string>{kWordEmbeddingName}));
}

// One AdamW step (torch.optim.AdamW / Apex FusedAdam in adam_w_mode, as Megatron steps),
// in double: p <- p - lr * (m_hat / (sqrt(v_hat) + eps) + wd * p).
double AdamWFirstStep(double p, double g, double lr, double wd, const OptimizerConfig& c) {
  const double b1 = c.adam_beta1(), b2 = c.adam_beta2();
  const double m_hat = (1.0 - b1) * g / (1.0 - b1);
  const double v_hat = (1.0 - b2) * g * g / (1.0 - b2);
  return p - lr * (m_hat / (std::sqrt(v_hat) + c.adam_eps()) + wd * p);
}

// --decoupled-lr: one step moves the embedding and output layer weights with the
// decoupled rate and every other parameter with --lr, in both updaters.
TEST(DecoupledLrTest, OneStepUsesTheGroupsRates) {
  for (const bool distributed : {false, true}) {
    SCOPED_TRACE(distributed ? "distributed optimizer" : "replicated");
    const TensorParallel tp;
    GptModel model(&CpuOps::Get(), DecoupledShape(false), 5, &tp);
    Config config;
    OptimizerConfig& o = *config.mutable_optimizer();
    o.set_lr(0.01f);
    o.set_lr_decay_style("constant");
    o.set_lr_decay_iters(10);
    o.set_decoupled_lr(0.003f);
    o.set_weight_decay(0.1f);
    o.set_clip_grad(0.0f);
    config.mutable_parallel()->set_use_distributed_optimizer(distributed);
    std::vector<Parameter*> params = model.parameters().parameters();
    const RankContext one_rank = RankContext::SingleProcess();
    std::unique_ptr<ParameterUpdater> u =
        MakeParameterUpdater(ForOneRank(config), one_rank, {params, {}}, &CpuOptimizerOps::Get());
    std::map<std::string, std::vector<float>> before;
    for (Parameter* p : params) {
      for (int64_t i = 0; i < p->grad.numel(); ++i) {
        p->grad.data()[i] = 0.05f * static_cast<float>((i % 7) - 3) + 0.01f;
      }
      before[p->name] = std::vector<float>(p->value.data(), p->value.data() + p->value.numel());
    }
    const StepLearningRates rates = LrSchedule(o).RatesForIteration(1);
    ASSERT_DOUBLE_EQ(rates.main, o.lr());
    ASSERT_DOUBLE_EQ(rates.decoupled, o.decoupled_lr());
    ASSERT_TRUE(u->ReduceGradients().ok());
    ASSERT_TRUE(u->Step(0.0, rates).ok());
    int decoupled = 0;
    for (const Parameter* p : params) {
      const double lr = p->embedding_or_output ? o.decoupled_lr() : o.lr();
      const double wd = p->weight_decay ? o.weight_decay() : 0.0;
      decoupled += p->embedding_or_output;
      for (int64_t i = 0; i < p->value.numel(); ++i) {
        const double want = AdamWFirstStep(before[p->name][i], p->grad.data()[i], lr, wd, o);
        ASSERT_NEAR(p->value.data()[i], want, 1e-6) << p->name << "[" << i << "]";
      }
    }
    EXPECT_EQ(decoupled, 2);
  }
}

}  // namespace
}  // namespace conveyor
