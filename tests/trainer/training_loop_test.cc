// The training loop end to end on small models: it learns, it is deterministic,
// gradient accumulation is exact, and NaNs are caught.
#include "trainer/training_loop.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>
#include <vector>

#include "base/exit_code.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/cpu/cpu_ops.h"
#include "runtime/memory_tracker.h"
#include "tests/util/test_dirs.h"
#include "trainer/checkpoint/file_io.h"
#include "trainer/config/config_validation.h"
#include "trainer/config/resolved_config.h"
#include "trainer/evaluation.h"
#include "trainer/optimization/expert_bias_update.h"

namespace conveyor {
namespace {

// Every sample is a window of one short repeating token sequence.
class RepeatingSource : public SampleSource {
 public:
  RepeatingSource(std::vector<int32_t> pattern, int seq) : pattern_(pattern), seq_(seq) {}
  int64_t size() const override { return static_cast<int64_t>(pattern_.size()); }
  absl::StatusOr<std::vector<int32_t>> Sample(int64_t index) const override {
    std::vector<int32_t> tokens(seq_ + 1);
    for (int i = 0; i <= seq_; ++i) tokens[i] = pattern_[(index + i) % pattern_.size()];
    return tokens;
  }

 private:
  std::vector<int32_t> pattern_;
  int seq_;
};

Config SmallConfig() {
  Config c;
  c.mutable_model()->set_num_layers(2);
  c.mutable_model()->set_hidden_size(32);
  c.mutable_model()->set_num_attention_heads(4);
  c.mutable_model()->set_seq_length(16);
  c.mutable_model()->set_vocab_size(64);
  c.mutable_model()->set_make_vocab_size_divisible_by(64);
  c.mutable_model()->set_hidden_dropout(0);
  c.mutable_model()->set_attention_dropout(0);
  c.mutable_training()->set_micro_batch_size(4);
  c.mutable_training()->set_num_micro_batches(1);
  c.mutable_training()->set_train_iters(10);
  c.mutable_optimizer()->set_lr(1e-2);
  c.mutable_optimizer()->set_lr_decay_style("constant");
  c.mutable_data()->set_mock_data(true);
  c.mutable_logging()->set_log_interval(1);
  return c;
}

Config Resolve(const Config& c) {
  absl::StatusOr<Config> r = ResolveConfig(c, 1);
  EXPECT_TRUE(r.ok()) << r.status();
  return *r;
}

// A resolved `config` as Train takes it (a resolved config resolves to itself).
ResolvedConfig Resolved(const Config& config) {
  absl::StatusOr<ResolvedConfig> resolved = ResolvedConfig::Resolve(config, 1);
  EXPECT_TRUE(resolved.ok()) << resolved.status();
  return *std::move(resolved);
}

// The whole model on one rank.
std::unique_ptr<GptStage> OneRankModel(const Config& config) {
  const ResolvedConfig resolved = Resolved(config);
  static const TensorParallel* const one_rank = new TensorParallel();
  return std::make_unique<GptStage>(&CpuOps::Get(), resolved.model_shape(),
                                    config.training().seed(), one_rank, pipeline::PipelinePlace{},
                                    std::vector<int64_t>{config.model().num_layers()},
                                    resolved.recompute_policy());
}

TrainingResult TrainOrDie(const Config& config, const SampleSource& data,
                          std::ostream* log = nullptr, std::ostream* metrics = nullptr) {
  std::unique_ptr<GptStage> model = OneRankModel(config);
  absl::StatusOr<TrainingResult> r =
      Train(Resolved(config), RankContext::SingleProcess(), model.get(), data, {log, metrics});
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : TrainingResult();
}

const RepeatingSource kPattern({7, 3, 41, 9, 22, 3, 58, 14, 30, 11}, 16);

// A 2-layer model memorises a repeating sequence: within 80 steps of AdamW at a
// constant 1e-2 the loss falls from ~ln(64) = 4.2 to under 0.1.
TEST(TrainingLoopTest, TwoLayerModelMemorisesRepeatingSequence) {
  Config c = SmallConfig();
  c.mutable_training()->set_train_iters(80);
  const TrainingResult r = TrainOrDie(Resolve(c), kPattern);
  ASSERT_EQ(r.losses.size(), 80u);
  EXPECT_GT(r.losses.front(), 3.5);
  EXPECT_LT(r.losses.back(), 0.1);
}

TEST(TrainingLoopTest, SameConfigGivesBitIdenticalLosses) {
  Config c = SmallConfig();
  c.mutable_model()->set_hidden_dropout(0.1f);
  c.mutable_model()->set_attention_dropout(0.1f);
  const TrainingResult a = TrainOrDie(Resolve(c), kPattern);
  const TrainingResult b = TrainOrDie(Resolve(c), kPattern);
  EXPECT_EQ(a.losses, b.losses);
}

// Megatron semantics: a step over M micro-batches of size b sees the same samples as
// one micro-batch of size M * b, so losses agree up to summation order.
TEST(TrainingLoopTest, GradientAccumulationMatchesOneLargeMicroBatch) {
  Config split = SmallConfig();
  split.mutable_training()->set_micro_batch_size(1);
  split.mutable_training()->set_num_micro_batches(4);
  const TrainingResult a = TrainOrDie(Resolve(split), kPattern);
  const TrainingResult b = TrainOrDie(Resolve(SmallConfig()), kPattern);
  ASSERT_EQ(a.losses.size(), b.losses.size());
  for (size_t i = 0; i < a.losses.size(); ++i) {
    EXPECT_NEAR(a.losses[i], b.losses[i], 1e-4) << "iteration " << i + 1;
  }
  EXPECT_EQ(a.consumed_samples, 40);
}

class NanSource : public SampleSource {
 public:
  int64_t size() const override { return 1; }
  absl::StatusOr<std::vector<int32_t>> Sample(int64_t) const override {
    return std::vector<int32_t>(17, 1);
  }
};

TEST(TrainingLoopTest, NanLossStopsWithIterationAndFlag) {
  const Config c = Resolve(SmallConfig());
  std::unique_ptr<GptStage> model = OneRankModel(c);
  model->parameters()[0]->value.data()[0] = std::numeric_limits<float>::quiet_NaN();
  absl::StatusOr<TrainingResult> r =
      Train(Resolved(c), RankContext::SingleProcess(), model.get(), NanSource(), {});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(
      std::string(r.status().message()),
      ::testing::AllOf(::testing::HasSubstr("iteration 1"), ::testing::HasSubstr("--nan-policy")));
}

// A run whose every step was skipped trained nothing: it fails, saving nothing (a
// checkpoint would hold the loaded weights under a later iteration), after logging the
// skipped steps.
TEST(TrainingLoopTest, NanPolicySkipFailsWhenEveryStepWasSkipped) {
  Config c = SmallConfig();
  c.mutable_training()->set_nan_policy("skip");
  c.mutable_training()->set_train_iters(3);
  const std::string save = testing_util::FreshDir("all_skipped");
  c.mutable_checkpoint()->set_save(save);
  c.mutable_checkpoint()->set_save_interval(1);
  c = Resolve(c);
  std::unique_ptr<GptStage> model = OneRankModel(c);
  Parameter* p = model->parameters()[0];
  p->value.data()[0] = std::numeric_limits<float>::infinity();
  std::ostringstream log, metrics;
  absl::StatusOr<TrainingResult> r =
      Train(Resolved(c), RankContext::SingleProcess(), model.get(), NanSource(), {&log, &metrics});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()),
              ::testing::AllOf(::testing::HasSubstr("every one of this run's 3 steps"),
                               ::testing::HasSubstr("--nan-policy skip"),
                               ::testing::HasSubstr("nothing was saved")));
  EXPECT_EQ(ExitCodeFor(r.status()), 1);
  EXPECT_TRUE(std::isinf(p->value.data()[0]));  // no update was applied
  EXPECT_THAT(log.str(), ::testing::HasSubstr("number of nan iterations:   1"));
  EXPECT_THAT(log.str(), ::testing::HasSubstr("not saving iteration 1"));
  EXPECT_THAT(metrics.str(), ::testing::HasSubstr("\"lm_loss\": null"));
  EXPECT_FALSE(PathExists(save + "/latest_checkpointed_iteration.txt"));
}

// Skipped steps in a row beyond the bound stop a long run at once, not after it.
TEST(TrainingLoopTest, NanPolicySkipStopsAfterTenSkippedStepsInARow) {
  Config c = SmallConfig();
  c.mutable_training()->set_nan_policy("skip");
  c.mutable_training()->set_train_iters(1000);
  c = Resolve(c);
  std::unique_ptr<GptStage> model = OneRankModel(c);
  model->parameters()[0]->value.data()[0] = std::numeric_limits<float>::infinity();
  absl::StatusOr<TrainingResult> r =
      Train(Resolved(c), RankContext::SingleProcess(), model.get(), NanSource(), {});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()),
              ::testing::AllOf(::testing::HasSubstr("iteration 10: the last 10 steps"),
                               ::testing::HasSubstr("stops without saving")));
}

// --moe-router-enable-expert-bias: a skipped step (NaN) leaves the expert biases alone
// and drops its token counts; the same step applied moves them by the rate (every token
// is the same, so each layer's tokens all go to the same two experts, over the mean).
TEST(TrainingLoopTest, SkippedStepsLeaveTheExpertBiasAlone) {
  for (const bool skipped : {false, true}) {
    Config c = SmallConfig();
    c.mutable_model()->set_num_experts(4);
    c.mutable_model()->set_disable_bias_linear(true);
    c.mutable_model()->set_moe_router_score_function("sigmoid");
    c.mutable_model()->set_moe_router_enable_expert_bias(true);
    c.mutable_model()->set_moe_router_bias_update_rate(0.25f);
    c.mutable_training()->set_nan_policy("skip");
    c.mutable_training()->set_train_iters(1);
    c = Resolve(c);
    std::unique_ptr<GptStage> model = OneRankModel(c);
    // The word embedding of token 0 (NanSource's tokens are all 1): the tied output
    // layer's logit for token 0 turns inf, the loss NaN, the routing stays finite.
    if (skipped) model->parameters()[0]->value.data()[0] = std::numeric_limits<float>::infinity();
    absl::StatusOr<TrainingResult> r =
        Train(Resolved(c), RankContext::SingleProcess(), model.get(), NanSource(), {});
    // The one step skipped: the run trained nothing and fails (the model is still there).
    ASSERT_EQ(r.ok(), !skipped) << r.status();
    const std::vector<ExpertBias*> biases = StageExpertBiases(model.get());
    ASSERT_EQ(biases.size(), 2u);
    for (const ExpertBias* bias : biases) {
      const std::vector<float> values(bias->values().begin(), bias->values().end());
      std::vector<float> sorted = values;
      std::sort(sorted.begin(), sorted.end());
      EXPECT_EQ(sorted, skipped ? std::vector<float>(4, 0.0f)
                                : std::vector<float>({-0.25f, -0.25f, 0.25f, 0.25f}))
          << bias->name();
      EXPECT_EQ(std::vector<float>(bias->step_tokens().begin(), bias->step_tokens().end()),
                std::vector<float>(4, 0.0f))
          << bias->name();
    }
  }
}

TEST(TrainingLoopTest, LogsEveryIntervalInMegatronFormat) {
  Config c = SmallConfig();
  c.mutable_training()->set_train_iters(4);
  c.mutable_logging()->set_log_interval(2);
  std::ostringstream log, metrics;
  TrainOrDie(Resolve(c), kPattern, &log, &metrics);
  EXPECT_THAT(log.str(), ::testing::HasSubstr(" iteration        2/       4 | consumed samples:"
                                              "            8 |"));
  EXPECT_THAT(log.str(), ::testing::HasSubstr("global batch size:     4 | lm loss:"));
  EXPECT_THAT(log.str(), ::testing::HasSubstr("memory (MiB)"));
  std::istringstream lines(metrics.str());
  std::string line;
  int count = 0;
  while (std::getline(lines, line)) {
    ++count;
    EXPECT_THAT(line, ::testing::StartsWith("{\"iteration\": " + std::to_string(2 * count)));
  }
  EXPECT_EQ(count, 2);
}

// A mixture of experts logs Megatron's router losses and the experts' load; full
// recomputation reruns the router's forward but counts each micro-batch once.
TEST(TrainingLoopTest, LogsMixtureOfExpertsFigures) {
  Config c = SmallConfig();
  c.mutable_training()->set_train_iters(2);
  c.mutable_training()->set_num_micro_batches(2);
  c.mutable_model()->set_disable_bias_linear(true);
  c.mutable_model()->set_num_experts(4);
  c.mutable_model()->add_moe_aux_loss_coeff(0.01f);
  c.mutable_model()->set_moe_z_loss_coeff(0.001f);
  c.mutable_model()->set_moe_expert_capacity_factor(1.0f);
  std::ostringstream log, metrics;
  TrainOrDie(Resolve(c), kPattern, &log, &metrics);
  EXPECT_THAT(log.str(), ::testing::ContainsRegex(
                             "lm loss: [0-9.E+-]+ \\| load_balancing_loss: [0-9.E+-]+ \\| "
                             "z_loss: [0-9.E+-]+ \\| tokens per expert \\(min/max\\): "
                             "[0-9]+/[0-9]+ \\| dropped tokens: [0-9]+ \\| grad norm"));
  // Per step: 2 micro-batches of 4 x 16 tokens, top-2 over 4 experts, so an expert's
  // capacity is ceil(64 * 2 / 4) = 32 tokens per micro-batch, 64 per step, and the
  // slots that fit nowhere are dropped.
  std::istringstream lines(metrics.str());
  std::string line;
  int steps = 0;
  while (std::getline(lines, line)) {
    if (line.find("\"lm_loss\"") == std::string::npos) continue;
    ++steps;
    int max_tokens = 0, dropped = 0;
    const size_t at = line.find("\"max_tokens_per_expert\": ");
    ASSERT_NE(at, std::string::npos) << line;
    ASSERT_EQ(std::sscanf(line.c_str() + at,
                          "\"max_tokens_per_expert\": %d, \"dropped_tokens\": %d",
                          &max_tokens, &dropped),
              2)
        << line;
    EXPECT_LE(max_tokens, 64);
    EXPECT_GT(dropped, 0);
  }
  EXPECT_EQ(steps, 2);

  auto moe_figures = [](const std::string& text) {
    std::vector<std::string> figures;
    for (size_t at = text.find("load_balancing_loss"); at != std::string::npos;
         at = text.find("load_balancing_loss", at + 1)) {
      figures.push_back(text.substr(at, text.find("grad norm", at) - at));
    }
    return figures;
  };
  Config recomputed = c;
  recomputed.mutable_recompute()->set_recompute_granularity("full");
  recomputed.mutable_recompute()->set_recompute_method("uniform");
  recomputed.mutable_recompute()->set_recompute_num_layers(1);
  std::ostringstream recomputed_log;
  TrainOrDie(Resolve(recomputed), kPattern, &recomputed_log);
  EXPECT_EQ(moe_figures(recomputed_log.str()), moe_figures(log.str()));
  EXPECT_EQ(moe_figures(log.str()).size(), 2u);
}

// Megatron's list form: each listed type's loss is logged under Megatron's name, in its
// order (not the command line's), then the z-loss; global_aux_loss on one rank counts the
// step's micro-batches so far.
TEST(TrainingLoopTest, LogsEachListedLoadBalancingLoss) {
  Config c = SmallConfig();
  c.mutable_training()->set_train_iters(1);
  c.mutable_training()->set_num_micro_batches(2);
  ModelConfig& m = *c.mutable_model();
  m.set_disable_bias_linear(true);
  m.set_num_experts(4);
  for (const char* type : {"global_aux_loss", "seq_aux_loss", "aux_loss"}) {
    m.add_moe_router_load_balancing_type(type);
    m.add_moe_aux_loss_coeff(0.01f);
  }
  std::ostringstream log, metrics;
  TrainOrDie(Resolve(c), kPattern, &log, &metrics);
  EXPECT_THAT(log.str(), ::testing::ContainsRegex(
                             "lm loss: [0-9.E+-]+ \\| load_balancing_loss: [0-9.E+-]+ \\| "
                             "seq_load_balancing_loss: [0-9.E+-]+ \\| "
                             "global_load_balancing_loss: [0-9.E+-]+ \\| z_loss: [0-9.E+-]+ \\| "
                             "tokens per expert"));
  for (const char* key : {"\"load_balancing_loss\": ", "\"seq_load_balancing_loss\": ",
                          "\"global_load_balancing_loss\": ", "\"z_loss\": "}) {
    EXPECT_THAT(metrics.str(), ::testing::HasSubstr(key));
  }
  Config none = c;
  none.mutable_model()->clear_moe_router_load_balancing_type();
  none.mutable_model()->clear_moe_aux_loss_coeff();
  none.mutable_model()->add_moe_router_load_balancing_type("none");
  std::ostringstream none_log;
  TrainOrDie(Resolve(none), kPattern, &none_log);
  EXPECT_THAT(none_log.str(), ::testing::ContainsRegex("lm loss: [0-9.E+-]+ \\| z_loss: "));
}

struct RecomputeCase {
  std::string name;
  std::string granularity;
  std::string method;
  int num_layers;
  std::vector<std::string> modules;
};

// Recomputation changes memory, never results: every setting reproduces the run
// without it bit for bit (same RNG keys, same operation order), and full
// recomputation lowers the activation peak.
// Megatron's end of a completed run: the validation split's next batches (after the
// in-loop evaluations' ones) and the test split's first ones.
TEST(TrainingLoopTest, CompletedRunEndsWithValidationAndTestLosses) {
  Config c = SmallConfig();
  c.mutable_data()->set_eval_interval(4);
  c.mutable_data()->set_eval_iters(2);
  const Config config = Resolve(c);
  const RepeatingSource valid({5, 17, 2, 60, 33, 8, 19, 44, 1, 27, 50}, 16);
  const RepeatingSource test({12, 6, 39, 23, 3, 55}, 16);
  std::unique_ptr<GptStage> model = OneRankModel(config);
  std::ostringstream log;
  absl::StatusOr<TrainingResult> r = Train(Resolved(config), RankContext::SingleProcess(),
                                           model.get(), kPattern, {&log, nullptr}, {&valid, &test});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->valid_losses.size(), 2u);  // iterations 4 and 8
  ASSERT_TRUE(r->final_valid_loss.has_value());
  ASSERT_TRUE(r->test_loss.has_value());
  // Two evaluations of 2 batches of 4 samples came before: the final one starts at 16.
  absl::StatusOr<double> final_valid =
      Evaluate(Resolved(config), RankContext::SingleProcess(), model.get(), valid, 16);
  absl::StatusOr<double> test_loss =
      Evaluate(Resolved(config), RankContext::SingleProcess(), model.get(), test, 0);
  ASSERT_TRUE(final_valid.ok() && test_loss.ok());
  EXPECT_EQ(*r->final_valid_loss, *final_valid);
  EXPECT_EQ(*r->test_loss, *test_loss);
  EXPECT_NE(*r->final_valid_loss, *r->test_loss);
  EXPECT_THAT(log.str(), testing::HasSubstr(" validation loss at iteration 10 on validation set | "
                                            "lm loss value: "));
  EXPECT_THAT(log.str(),
              testing::HasSubstr(" validation loss at iteration 10 on test set | lm loss value: "));

  // A run an exit condition stops early does not evaluate at its end (as Megatron).
  c.mutable_checkpoint()->set_exit_interval(5);
  const Config stopped = Resolve(c);
  model = OneRankModel(stopped);
  r = Train(Resolved(stopped), RankContext::SingleProcess(), model.get(), kPattern, {},
            {&valid, &test});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->exited_early);
  EXPECT_FALSE(r->final_valid_loss.has_value());
  EXPECT_FALSE(r->test_loss.has_value());
}

TEST(TrainingLoopTest, RecomputationIsExactAndSavesActivationMemory) {
  Config base = SmallConfig();
  base.mutable_model()->set_num_layers(4);
  base.mutable_model()->set_hidden_dropout(0.1f);
  base.mutable_model()->set_attention_dropout(0.1f);
  base.mutable_training()->set_micro_batch_size(2);
  base.mutable_training()->set_num_micro_batches(2);
  base.mutable_training()->set_train_iters(4);
  auto train = [](const Config& c, int64_t* peak_activations) {
    std::unique_ptr<GptStage> model = OneRankModel(c);
    MemoryTracker::Global().ResetPeaks();
    const int64_t before = MemoryTracker::Global().live_bytes(MemoryCategory::kActivations);
    absl::StatusOr<TrainingResult> r =
        Train(Resolved(c), RankContext::SingleProcess(), model.get(), kPattern, {});
    EXPECT_TRUE(r.ok()) << r.status();
    *peak_activations = MemoryTracker::Global().peak_bytes(MemoryCategory::kActivations) - before;
    std::vector<float> params;
    for (Parameter* p : model->parameters()) {
      params.insert(params.end(), p->value.data(), p->value.data() + p->value.numel());
    }
    return std::make_pair(r->losses, params);
  };
  int64_t peak_without = 0;
  const auto without = train(Resolve(base), &peak_without);
  const std::vector<RecomputeCase> cases = {
      {"selective core_attn", "selective", "", 0, {"core_attn"}},
      {"selective all", "selective", "", 0, {"core_attn", "mlp", "layernorm"}},
      {"full uniform 1", "full", "uniform", 1, {}},
      {"full uniform 2", "full", "uniform", 2, {}},
      {"full block 3", "full", "block", 3, {}},
  };
  for (const RecomputeCase& rc : cases) {
    Config c = base;
    c.mutable_recompute()->set_recompute_granularity(rc.granularity);
    c.mutable_recompute()->set_recompute_method(rc.method);
    c.mutable_recompute()->set_recompute_num_layers(rc.num_layers);
    for (const std::string& m : rc.modules) c.mutable_recompute()->add_recompute_modules(m);
    int64_t peak = 0;
    const auto with = train(Resolve(c), &peak);
    EXPECT_EQ(with.first, without.first) << rc.name;
    EXPECT_EQ(with.second, without.second) << rc.name;
    EXPECT_LT(peak, peak_without) << rc.name;
  }
}

}  // namespace
}  // namespace conveyor
