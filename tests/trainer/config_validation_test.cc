#include "trainer/config/config_validation.h"

#include <cctype>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "proto/config.pb.h"
#include "tests/trainer/config_fixtures.h"
#include "trainer/config/flags.h"

namespace conveyor {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::StartsWith;
using testing_util::SmallestValidConfig;

void SetWorld(Config* c, int ranks) { c->mutable_parallel()->set_nproc_per_node(ranks); }

bool IsFlag(const std::string& name) {
  if (name == "--config" || name == "--help") return true;
  for (const FlagField& f : AllFlagFields()) {
    if (FlagName(*f.field) == name) return true;
  }
  return false;
}

// Validates and checks the form of every line: it starts with a flag, and every
// "--name" it mentions is a real flag.
std::vector<std::string> Validate(const Config& c, int world_size = 1) {
  const std::vector<std::string> problems = ValidateConfig(c, world_size);
  for (const std::string& line : problems) {
    EXPECT_THAT(line, StartsWith("--"));
    for (size_t at = line.find("--"); at != std::string::npos; at = line.find("--", at + 2)) {
      size_t end = at + 2;
      while (end < line.size() &&
             (std::islower(line[end]) || std::isdigit(line[end]) || line[end] == '-')) {
        ++end;
      }
      const std::string name = line.substr(at, end - at);
      EXPECT_TRUE(IsFlag(name)) << "'" << name << "' in: " << line;
      at = end - 2;
    }
  }
  return problems;
}

// A line that mentions every one of the given texts.
template <typename... Texts>
auto Line(const Texts&... texts) {
  return Contains(AllOf(HasSubstr(texts)...));
}

TEST(ValidateConfigTest, ValidConfigHasNoProblems) {
  EXPECT_THAT(Validate(SmallestValidConfig()), IsEmpty());
  Config c = SmallestValidConfig();
  c.mutable_model()->set_num_layers(8);
  c.mutable_parallel()->set_tensor_model_parallel_size(2);
  c.mutable_parallel()->set_pipeline_model_parallel_size(2);
  c.mutable_parallel()->set_num_virtual_stages_per_pipeline_rank(2);
  c.mutable_training()->set_micro_batch_size(2);
  c.mutable_training()->set_global_batch_size(16);
  SetWorld(&c, 8);
  EXPECT_THAT(Validate(c, 8), IsEmpty());
}

TEST(ValidateConfigTest, MixtureOfExpertsRules) {
  Config c = SmallestValidConfig();
  c.mutable_model()->set_num_experts(4);
  c.mutable_model()->set_disable_bias_linear(true);
  c.mutable_model()->set_moe_layer_freq("([1]*1+[0]*1)*1");
  EXPECT_THAT(Validate(c), IsEmpty());
  c.mutable_model()->set_moe_router_topk(5);
  c.mutable_model()->set_moe_layer_freq("[1,1,1]");
  c.mutable_model()->set_moe_pad_expert_input_to_capacity(true);
  c.mutable_model()->add_moe_aux_loss_coeff(-1);
  c.mutable_model()->set_disable_bias_linear(false);
  c.mutable_model()->set_moe_router_enable_expert_bias(true);
  c.mutable_parallel()->set_tensor_model_parallel_size(2);
  SetWorld(&c, 2);
  const std::vector<std::string> problems = Validate(c, 2);
  EXPECT_THAT(problems, Contains(HasSubstr("--moe-router-topk 5 must be between 1 and")));
  EXPECT_THAT(problems, Contains(HasSubstr("gives 3 layers but --num-layers is 2")));
  EXPECT_THAT(problems, Contains(StartsWith("--moe-pad-expert-input-to-capacity")));
  EXPECT_THAT(problems, Contains(StartsWith("--moe-aux-loss-coeff -1 must not be negative")));
  EXPECT_THAT(problems, Contains(HasSubstr("add --disable-bias-linear")));
  EXPECT_THAT(problems, Contains(HasSubstr("works with sigmoid scores only, as in Megatron: "
                                           "add --moe-router-score-function sigmoid")));
  EXPECT_THAT(problems, Contains(HasSubstr("needs --sequence-parallel")));
  c.mutable_parallel()->set_sequence_parallel(true);
  c.mutable_model()->set_moe_ffn_hidden_size(33);
  EXPECT_THAT(Validate(c, 2),
              Contains(StartsWith("--moe-ffn-hidden-size 33 must be divisible by "
                                  "--tensor-model-parallel-size 2")));
}

// Megatron's list form pairs each --moe-router-load-balancing-type with its
// --moe-aux-loss-coeff; --moe-router-dtype fp64 has no GEMM here.
TEST(ValidateConfigTest, LoadBalancingTypesAndRouterDtype) {
  Config c = SmallestValidConfig();
  ModelConfig& m = *c.mutable_model();
  m.set_num_experts(4);
  m.set_disable_bias_linear(true);
  m.add_moe_router_load_balancing_type("seq_aux_loss");
  m.add_moe_router_load_balancing_type("global_aux_loss");
  m.add_moe_aux_loss_coeff(0.01f);
  m.add_moe_aux_loss_coeff(0.001f);
  m.set_moe_router_dtype("fp32");
  EXPECT_THAT(Validate(c), IsEmpty());
  // Refused on a GPU until it has trained on one, naming the flags and the way out.
  c.mutable_parallel()->set_device("cuda");
  EXPECT_THAT(Validate(c),
              ElementsAre(AllOf(StartsWith("--moe-router-dtype fp32 with --device "
                                           "cuda: the fp32 router"),
                                HasSubstr("has never run on a GPU; run it with "
                                          "--device cpu, or drop --moe-router-dtype"))));
  c.mutable_parallel()->clear_device();
  m.add_moe_aux_loss_coeff(0.1f);
  EXPECT_THAT(Validate(c),
              Contains(StartsWith("--moe-aux-loss-coeff has 3 values for 2 "
                                  "--moe-router-load-balancing-type types (seq_aux_loss "
                                  "global_aux_loss): give one coefficient per type")));
  m.clear_moe_aux_loss_coeff();
  m.add_moe_aux_loss_coeff(0.01f);
  m.add_moe_aux_loss_coeff(0.01f);
  m.add_moe_aux_loss_coeff(0.01f);
  m.add_moe_router_load_balancing_type("seq_aux_loss");
  m.set_moe_router_dtype("fp64");
  c.mutable_parallel()->set_use_distributed_optimizer(true);
  c.mutable_parallel()->set_overlap_param_gather(true);
  const std::vector<std::string> problems = Validate(c);
  EXPECT_THAT(problems,
              Contains(StartsWith("--moe-router-load-balancing-type lists seq_aux_loss twice")));
  EXPECT_THAT(problems, Contains(StartsWith("--moe-router-dtype fp64: a float64 router GEMM is "
                                            "not implemented")));
  EXPECT_THAT(problems, Contains(StartsWith("--moe-router-load-balancing-type global_aux_loss "
                                            "sums each micro-batch's expert counts")));
  Config sinkhorn = SmallestValidConfig();
  sinkhorn.mutable_model()->set_num_experts(4);
  sinkhorn.mutable_model()->set_disable_bias_linear(true);
  sinkhorn.mutable_model()->add_moe_router_load_balancing_type("sinkhorn");
  sinkhorn.mutable_model()->add_moe_router_load_balancing_type("quantile_balancing");
  sinkhorn.mutable_model()->add_moe_aux_loss_coeff(0.0f);
  sinkhorn.mutable_model()->add_moe_aux_loss_coeff(0.0f);
  EXPECT_THAT(Validate(sinkhorn),
              Contains(StartsWith("--moe-router-load-balancing-type sinkhorn: S-BASE's "
                                  "Sinkhorn balancing is not implemented")));
  EXPECT_THAT(Validate(sinkhorn), Contains(StartsWith("--moe-router-load-balancing-type "
                                                      "quantile_balancing: quantile balancing")));
  // One type and one value, or no value (0), as Megatron's single-value form.
  Config single = SmallestValidConfig();
  single.mutable_model()->set_num_experts(4);
  single.mutable_model()->set_disable_bias_linear(true);
  single.mutable_model()->add_moe_router_load_balancing_type("global_aux_loss");
  EXPECT_THAT(Validate(single), IsEmpty());
  single.mutable_model()->add_moe_aux_loss_coeff(0.01f);
  EXPECT_THAT(Validate(single), IsEmpty());
}

TEST(ValidateConfigTest, ExpertBiasNeedsSigmoidScoresAndARateOfAtLeastZero) {
  Config c = SmallestValidConfig();
  c.mutable_model()->set_num_experts(4);
  c.mutable_model()->set_disable_bias_linear(true);
  c.mutable_model()->set_moe_router_enable_expert_bias(true);
  c.mutable_model()->set_moe_router_score_function("sigmoid");
  EXPECT_THAT(Validate(c), IsEmpty());
  c.mutable_model()->set_moe_router_bias_update_rate(-0.001f);
  EXPECT_THAT(Validate(c),
              Contains(StartsWith("--moe-router-bias-update-rate -0.001 must not be negative")));
}

// Group-limited routing splits the experts evenly and takes at least one pick per chosen
// group; the shared expert's gate needs a shared expert.
TEST(ValidateConfigTest, GroupLimitedRoutingAndTheSharedExpertGate) {
  Config c = SmallestValidConfig();
  c.mutable_model()->set_num_experts(8);
  c.mutable_model()->set_disable_bias_linear(true);
  c.mutable_model()->set_moe_router_topk(4);
  c.mutable_model()->set_moe_router_num_groups(4);
  c.mutable_model()->set_moe_router_group_topk(2);
  c.mutable_model()->set_moe_shared_expert_intermediate_size(16);
  c.mutable_model()->set_moe_shared_expert_gate(true);
  EXPECT_THAT(Validate(c), IsEmpty());
  c.mutable_model()->set_moe_router_num_groups(3);
  c.mutable_model()->set_moe_router_group_topk(5);
  c.mutable_model()->set_moe_shared_expert_intermediate_size(0);
  const std::vector<std::string> problems = Validate(c);
  EXPECT_THAT(problems, Contains(StartsWith("--moe-router-num-groups 3 must divide --num-experts")));
  EXPECT_THAT(problems,
              Contains(StartsWith("--moe-router-group-topk 5 must be at most --moe-router-num-groups")));
  EXPECT_THAT(problems, Contains(StartsWith("--moe-router-topk 4 must be at least "
                                            "--moe-router-group-topk (5)")));
  EXPECT_THAT(problems, Contains(StartsWith("--moe-shared-expert-gate gates the shared expert")));
  c.mutable_model()->set_moe_router_num_groups(0);
  EXPECT_THAT(Validate(c), Contains(HasSubstr("go together: set both positive, or neither")));
}

// --moe-router-group-score-topk: at most a group's experts (8 / 4 = 2 here), and only with
// groups to score.
TEST(ValidateConfigTest, GroupScoreTopkFitsAGroup) {
  Config c = SmallestValidConfig();
  c.mutable_model()->set_num_experts(8);
  c.mutable_model()->set_disable_bias_linear(true);
  c.mutable_model()->set_moe_router_topk(3);
  c.mutable_model()->set_moe_router_num_groups(4);
  c.mutable_model()->set_moe_router_group_topk(2);
  c.mutable_model()->set_moe_router_group_score_topk(2);
  EXPECT_THAT(Validate(c), IsEmpty());
  c.mutable_model()->set_moe_router_group_score_topk(3);
  EXPECT_THAT(Validate(c), Contains(StartsWith("--moe-router-group-score-topk 3 must be between 0 "
                                               "(topk / group-topk) and a group's 2 experts")));
  c.mutable_model()->set_moe_router_num_groups(0);
  c.mutable_model()->set_moe_router_group_topk(0);
  EXPECT_THAT(Validate(c), Contains(StartsWith("--moe-router-group-score-topk 3 scores expert "
                                               "groups, but there are none")));
}

TEST(ValidateConfigTest, ExpertParallelRules) {
  Config c = SmallestValidConfig();
  c.mutable_parallel()->set_expert_model_parallel_size(2);
  SetWorld(&c, 4);
  EXPECT_THAT(Validate(c, 4), Contains(HasSubstr("--expert-model-parallel-size 2 splits a "
                                                 "mixture of experts' experts over ranks: add "
                                                 "--num-experts")));
  c.mutable_model()->set_num_experts(3);
  c.mutable_model()->set_disable_bias_linear(true);
  c.mutable_parallel()->set_expert_model_parallel_size(4);
  c.mutable_parallel()->set_tensor_model_parallel_size(2);
  c.mutable_parallel()->set_sequence_parallel(true);
  std::vector<std::string> problems = Validate(c, 4);
  EXPECT_THAT(problems, Contains(StartsWith("--num-experts 3 must be divisible by "
                                            "--expert-model-parallel-size 4")));
  EXPECT_THAT(problems, Contains(HasSubstr("--expert-model-parallel-size 4 must divide the "
                                           "ranks an expert's copies span (2 = world size 4 / "
                                           "(expert TP x PP))")));
  c.mutable_parallel()->set_expert_model_parallel_size(0);
  EXPECT_THAT(Validate(c, 4),
              Contains(StartsWith("--expert-model-parallel-size 0 must be at least 1")));
  c.mutable_parallel()->set_expert_model_parallel_size(1);
  EXPECT_THAT(Validate(c, 4), IsEmpty());
}

TEST(ValidateConfigTest, ExpertTensorParallelRules) {
  Config c = SmallestValidConfig();
  c.mutable_parallel()->set_tensor_model_parallel_size(2);
  c.mutable_parallel()->set_sequence_parallel(true);
  c.mutable_parallel()->set_expert_tensor_parallel_size(1);
  SetWorld(&c, 4);
  EXPECT_THAT(Validate(c, 4), Contains(StartsWith("--expert-tensor-parallel-size 1 splits a "
                                                  "mixture of experts' experts: add "
                                                  "--num-experts")));
  c.mutable_model()->set_num_experts(4);
  c.mutable_model()->set_disable_bias_linear(true);
  // Whole experts under TP 2: EP 4 spans the TP pairs and the two data-parallel ranks.
  c.mutable_parallel()->set_expert_model_parallel_size(4);
  EXPECT_THAT(Validate(c, 4), IsEmpty());
  c.mutable_parallel()->set_expert_tensor_parallel_size(2);
  EXPECT_THAT(Validate(c, 4), Contains(HasSubstr("--expert-model-parallel-size 4 must divide the "
                                                 "ranks an expert's copies span (2 = world size "
                                                 "4 / (expert TP x PP))")));
  c.mutable_parallel()->set_expert_model_parallel_size(1);
  c.mutable_parallel()->set_expert_tensor_parallel_size(3);
  EXPECT_THAT(Validate(c, 4), Contains(StartsWith("--expert-tensor-parallel-size 3 must divide "
                                                  "--tensor-model-parallel-size 2")));
  c.mutable_parallel()->set_tensor_model_parallel_size(4);
  c.mutable_model()->set_moe_ffn_hidden_size(10);
  c.mutable_parallel()->set_expert_tensor_parallel_size(4);
  EXPECT_THAT(Validate(c, 4), Contains(StartsWith("--moe-ffn-hidden-size 10 must be divisible by "
                                                  "--expert-tensor-parallel-size 4")));
  c.mutable_parallel()->set_expert_tensor_parallel_size(2);
  EXPECT_THAT(Validate(c, 4), Not(Contains(HasSubstr("--moe-ffn-hidden-size"))));
}

TEST(ValidateConfigTest, SizesMustBePositive) {
  Config c = SmallestValidConfig();
  c.mutable_model()->set_num_layers(0);
  c.mutable_model()->set_hidden_size(-1);
  c.mutable_model()->set_num_attention_heads(0);
  c.mutable_model()->set_seq_length(0);
  c.mutable_model()->set_ffn_hidden_size(-4);
  const std::vector<std::string> p = Validate(c);
  EXPECT_THAT(p, Line("--num-layers 0 must be positive"));
  EXPECT_THAT(p, Line("--hidden-size -1 must be positive"));
  EXPECT_THAT(p, Line("--num-attention-heads 0 must be positive"));
  EXPECT_THAT(p, Line("--seq-length 0 must be positive"));
  EXPECT_THAT(p, Line("--ffn-hidden-size -4 must not be negative"));
}

TEST(ValidateConfigTest, HiddenSizeDivisibleByHeads) {
  Config c = SmallestValidConfig();
  c.mutable_model()->set_hidden_size(100);
  c.mutable_model()->set_num_attention_heads(3);
  EXPECT_THAT(
      Validate(c),
      ElementsAre(
          "--hidden-size 100 is not divisible by --num-attention-heads 3: choose sizes with "
          "hidden-size % num-attention-heads == 0, or set --kv-channels"));
  c.mutable_model()->set_kv_channels(32);  // an explicit head dimension lifts the rule
  EXPECT_THAT(Validate(c), IsEmpty());
}

TEST(ValidateConfigTest, HeadsDivisibleByQueryGroups) {
  Config c = SmallestValidConfig();
  c.mutable_model()->set_num_query_groups(3);
  EXPECT_THAT(Validate(c), Line("--num-attention-heads 4", "--num-query-groups 3"));
}

TEST(ValidateConfigTest, HeadsDivisibleByTensorParallel) {
  Config c = SmallestValidConfig();
  c.mutable_model()->set_num_attention_heads(4);
  c.mutable_parallel()->set_tensor_model_parallel_size(3);
  EXPECT_THAT(Validate(c, 3), Line("--num-attention-heads 4", "--tensor-model-parallel-size 3"));
}

TEST(ValidateConfigTest, QueryGroupsDivisibleByTensorParallel) {
  Config c = SmallestValidConfig();
  c.mutable_model()->set_num_attention_heads(8);
  c.mutable_model()->set_num_query_groups(2);
  c.mutable_parallel()->set_tensor_model_parallel_size(4);
  EXPECT_THAT(Validate(c, 4), ElementsAre(AllOf(HasSubstr("--num-query-groups 2"),
                                                HasSubstr("--tensor-model-parallel-size 4"))));
}

TEST(ValidateConfigTest, FfnDivisibleByTensorParallel) {
  Config c = SmallestValidConfig();
  c.mutable_model()->set_ffn_hidden_size(510);
  c.mutable_parallel()->set_tensor_model_parallel_size(4);
  EXPECT_THAT(Validate(c, 4), ElementsAre(AllOf(HasSubstr("--ffn-hidden-size 510"),
                                                HasSubstr("--tensor-model-parallel-size 4"))));
}

TEST(ValidateConfigTest, RopeNeedsEvenHeadDimension) {
  Config c = SmallestValidConfig();
  c.mutable_model()->set_position_embedding_type("rope");
  c.mutable_model()->set_hidden_size(132);  // 4 heads of 33
  EXPECT_THAT(Validate(c), ElementsAre(AllOf(HasSubstr("--kv-channels 33"),
                                             HasSubstr("--position-embedding-type rope"))));
  c.mutable_model()->set_hidden_size(136);
  EXPECT_THAT(Validate(c), IsEmpty());
}

TEST(ValidateConfigTest, LearnedPositionsCoverTheSequence) {
  Config c = SmallestValidConfig();
  c.mutable_model()->set_max_position_embeddings(64);
  EXPECT_THAT(Validate(c), Line("--max-position-embeddings 64", "--seq-length 128"));
  c.mutable_model()->set_position_embedding_type("rope");  // no table to outgrow
  EXPECT_THAT(Validate(c), IsEmpty());
}

TEST(ValidateConfigTest, DropoutsAreProbabilitiesBelowOne) {
  Config c = SmallestValidConfig();
  c.mutable_model()->set_hidden_dropout(1.0f);
  c.mutable_model()->set_attention_dropout(-0.1f);
  const std::vector<std::string> p = Validate(c);
  EXPECT_THAT(p, Line("--hidden-dropout 1 must be in [0, 1)"));
  EXPECT_THAT(p, Line("--attention-dropout -0.1 must be in [0, 1)"));
}

TEST(ValidateConfigTest, NormEpsilonAndInitStdPositive) {
  Config c = SmallestValidConfig();
  c.mutable_model()->set_norm_epsilon(0);
  c.mutable_model()->set_init_method_std(-0.02f);
  const std::vector<std::string> p = Validate(c);
  EXPECT_THAT(p, Line("--norm-epsilon"));
  EXPECT_THAT(p, Line("--init-method-std"));
}

TEST(ValidateConfigTest, WorldDivisibleByModelParallel) {
  Config c = SmallestValidConfig();
  c.mutable_model()->set_num_layers(6);
  c.mutable_parallel()->set_tensor_model_parallel_size(2);
  c.mutable_parallel()->set_pipeline_model_parallel_size(3);
  SetWorld(&c, 8);
  EXPECT_THAT(Validate(c, 8),
              ElementsAre(AllOf(HasSubstr("--tensor-model-parallel-size 2"),
                                HasSubstr("--pipeline-model-parallel-size 3"),
                                HasSubstr("--nproc-per-node 8"), HasSubstr("world size 8"))));
}

TEST(ValidateConfigTest, WorldSizeMustBePositive) {
  EXPECT_THAT(Validate(SmallestValidConfig(), 0), Line("--nproc-per-node", "world size 0"));
}

TEST(ValidateConfigTest, MicroBatchPositive) {
  Config c = SmallestValidConfig();
  c.mutable_training()->set_micro_batch_size(0);
  EXPECT_THAT(Validate(c), Line("--micro-batch-size 0 must be positive"));
}

TEST(ValidateConfigTest, GlobalBatchDivisibleByMicroBatchTimesDp) {
  Config c = SmallestValidConfig();
  SetWorld(&c, 4);
  c.mutable_training()->set_micro_batch_size(2);
  c.mutable_training()->set_global_batch_size(12);
  EXPECT_THAT(Validate(c, 4), ElementsAre(AllOf(HasSubstr("--global-batch-size 12"),
                                                HasSubstr("--micro-batch-size 2"),
                                                HasSubstr("DP 4"), HasSubstr("= 8"))));
}

TEST(ValidateConfigTest, ContradictingBatchFlagsShowTheArithmetic) {
  Config c = SmallestValidConfig();
  SetWorld(&c, 4);
  c.mutable_training()->set_micro_batch_size(2);
  c.mutable_training()->set_global_batch_size(64);
  c.mutable_training()->set_num_micro_batches(4);
  EXPECT_THAT(
      Validate(c, 4),
      ElementsAre(AllOf(HasSubstr("--global-batch-size 64"), HasSubstr("--num-micro-batches 4"),
                        HasSubstr("--micro-batch-size 2"), HasSubstr("4 * 2 * DP 4"),
                        HasSubstr("= 32, not 64"))));
  c.mutable_training()->set_num_micro_batches(8);  // 8 * 2 * 4 = 64 agrees
  EXPECT_THAT(Validate(c, 4), IsEmpty());
}

TEST(ValidateConfigTest, LayersDivisibleByPipelineStages) {
  Config c = SmallestValidConfig();
  c.mutable_model()->set_num_layers(3);
  c.mutable_parallel()->set_pipeline_model_parallel_size(2);
  EXPECT_THAT(Validate(c, 2), ElementsAre(AllOf(HasSubstr("--num-layers 3"),
                                                HasSubstr("--pipeline-model-parallel-size 2"))));
  // An uneven split that adds up is fine ...
  c.mutable_parallel()->set_decoder_first_pipeline_num_layers(1);
  EXPECT_THAT(Validate(c, 2), IsEmpty());
  // ... one that does not is reported.
  c.mutable_model()->set_num_layers(5);
  c.mutable_parallel()->set_pipeline_model_parallel_size(3);
  c.mutable_parallel()->set_decoder_first_pipeline_num_layers(2);
  EXPECT_THAT(Validate(c, 3), Line("--decoder-first-pipeline-num-layers 2", "--num-layers 5"));
}

TEST(ValidateConfigTest, AccountingForEmbeddingChangesTheSplit) {
  Config c = SmallestValidConfig();
  c.mutable_model()->set_num_layers(3);
  c.mutable_parallel()->set_pipeline_model_parallel_size(2);
  c.mutable_parallel()->set_account_for_embedding_in_pipeline_split(true);
  EXPECT_THAT(Validate(c, 2), IsEmpty());  // 3 + 1 over 2 stages
}

TEST(ValidateConfigTest, TrainItersPositive) {
  Config c = SmallestValidConfig();
  c.mutable_training()->set_train_iters(0);
  EXPECT_THAT(Validate(c), Line("--train-iters 0"));
}

TEST(ValidateConfigTest, LearningRates) {
  Config c = SmallestValidConfig();
  c.mutable_optimizer()->set_lr(-1);
  EXPECT_THAT(Validate(c), Line("--lr -1 must not be negative"));
  c = SmallestValidConfig();
  c.mutable_optimizer()->set_lr(0.01f);
  c.mutable_optimizer()->set_min_lr(0.1f);
  EXPECT_THAT(Validate(c), ElementsAre(AllOf(HasSubstr("--min-lr 0.1"), HasSubstr("--lr 0.01"))));
}

TEST(ValidateConfigTest, WarmupItersAndFractionAreExclusive) {
  Config c = SmallestValidConfig();
  c.mutable_optimizer()->set_lr_warmup_iters(10);
  c.mutable_optimizer()->set_lr_warmup_fraction(0.1f);
  EXPECT_THAT(Validate(c),
              ElementsAre(AllOf(HasSubstr("--lr-warmup-iters 10"),
                                HasSubstr("--lr-warmup-fraction 0.1"), HasSubstr("exclusive"))));
}

TEST(ValidateConfigTest, WarmupNotLongerThanDecay) {
  Config c = SmallestValidConfig();
  c.mutable_optimizer()->set_lr_warmup_iters(200);  // train-iters is 100
  EXPECT_THAT(Validate(c), Line("--lr-warmup-iters 200", "--lr-decay-iters", "--train-iters"));
  c.mutable_optimizer()->set_lr_decay_iters(300);
  EXPECT_THAT(Validate(c), IsEmpty());
}

TEST(ValidateConfigTest, OptimizerRanges) {
  Config c = SmallestValidConfig();
  c.mutable_optimizer()->set_clip_grad(-1);
  c.mutable_optimizer()->set_adam_beta1(1.0f);
  c.mutable_optimizer()->set_adam_beta2(-0.5f);
  c.mutable_optimizer()->set_adam_eps(0);
  c.mutable_optimizer()->set_weight_decay(-0.1f);
  const std::vector<std::string> p = Validate(c);
  EXPECT_THAT(p, Line("--clip-grad -1"));
  EXPECT_THAT(p, Line("--adam-beta1 1"));
  EXPECT_THAT(p, Line("--adam-beta2 -0.5"));
  EXPECT_THAT(p, Line("--adam-eps 0"));
  EXPECT_THAT(p, Line("--weight-decay -0.1"));
  EXPECT_EQ(p.size(), 5u);
}

// A --config file is not checked against (choices) by the parser.
TEST(ValidateConfigTest, EveryChoiceFieldIsChecked) {
  Config c = SmallestValidConfig();
  c.mutable_model()->set_normalization("layernorm");
  c.mutable_optimizer()->set_lr_decay_style("step");
  c.mutable_parallel()->set_device("tpu");
  const std::vector<std::string> p = Validate(c);
  EXPECT_THAT(p, Line("--normalization 'layernorm'", "LayerNorm, RMSNorm"));
  EXPECT_THAT(p, Line("--lr-decay-style 'step'"));
  EXPECT_THAT(p, Line("--device 'tpu'"));
}

TEST(ValidateConfigTest, CudaTrainsEveryLayout) {
  // NCCL moves the device tensors (trainer/backend.h): the layout rules are the CPU's.
  Config c = SmallestValidConfig();
  c.mutable_parallel()->set_device("cuda");
  c.mutable_parallel()->set_tensor_model_parallel_size(2);
  c.mutable_parallel()->set_pipeline_model_parallel_size(2);
  EXPECT_THAT(Validate(c, 8), IsEmpty());
  EXPECT_THAT(Validate(c, 6), Line("world size 6"));
}

TEST(ResolveConfigTest, Bf16IsTheGpuDefault) {
  Config c = SmallestValidConfig();
  c.mutable_parallel()->set_device("cuda");
  absl::StatusOr<Config> gpu = ResolveConfig(c, 1);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_TRUE(gpu->precision().bf16());
  c.mutable_precision()->set_bf16(false);  // --bf16=false
  absl::StatusOr<Config> gpu_fp32 = ResolveConfig(c, 1);
  ASSERT_TRUE(gpu_fp32.ok()) << gpu_fp32.status();
  EXPECT_FALSE(gpu_fp32->precision().bf16());
  for (const char* device : {"cpu", "auto"}) {
    c = SmallestValidConfig();
    c.mutable_parallel()->set_device(device);
    absl::StatusOr<Config> cpu = ResolveConfig(c, 1);
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    EXPECT_FALSE(cpu->precision().bf16()) << device;
  }
}

TEST(ValidateConfigTest, ExactlyOneDataSource) {
  Config c = SmallestValidConfig();
  c.mutable_data()->set_mock_data(false);
  EXPECT_THAT(Validate(c), ElementsAre(AllOf(HasSubstr("--mock-data"), HasSubstr("--data-path"),
                                             HasSubstr("--train-data-path"))));
  c.mutable_data()->set_mock_data(true);
  c.mutable_data()->add_data_path("corpus");
  EXPECT_THAT(Validate(c), Line("--mock-data", "--data-path", "exclusive"));
  c.mutable_data()->set_mock_data(false);
  c.mutable_data()->add_train_data_path("train");
  EXPECT_THAT(Validate(c), Line("--data-path", "--train-data-path", "exclusive"));
  c.mutable_data()->clear_data_path();
  EXPECT_THAT(Validate(c), IsEmpty());
}

TEST(ValidateConfigTest, DataPathWeightsComeInPairs) {
  Config c = SmallestValidConfig();
  c.mutable_data()->set_mock_data(false);
  for (const char* v : {"0.3", "a", "0.7"}) c.mutable_data()->add_data_path(v);
  EXPECT_THAT(Validate(c), Line("--data-path", "starts with a weight", "pairs"));
  c.mutable_data()->add_data_path("b");
  EXPECT_THAT(Validate(c), IsEmpty());
  c.mutable_data()->set_split("90,x");
  EXPECT_THAT(Validate(c), Line("--split '90,x'"));
}

TEST(ValidateConfigTest, VocabSizeNeededWithoutTokenizer) {
  Config c = SmallestValidConfig();
  c.mutable_model()->set_vocab_size(0);
  EXPECT_THAT(Validate(c), Line("--vocab-size 0", "--mock-data"));
  c.mutable_data()->set_tokenizer_type("NullTokenizer");
  EXPECT_THAT(Validate(c), Line("--vocab-size 0", "--tokenizer-type NullTokenizer"));
  c.mutable_data()->set_tokenizer_type("GPT2BPETokenizer");
  const std::vector<std::string> p = Validate(c);
  EXPECT_THAT(p, Not(Line("--vocab-size")));  // the tokenizer fixes it
  EXPECT_THAT(p, Line("--vocab-file", "GPT2BPETokenizer"));
  EXPECT_THAT(p, Line("--merge-file", "GPT2BPETokenizer"));
}

TEST(ValidateConfigTest, LogIntervalPositive) {
  Config c = SmallestValidConfig();
  c.mutable_logging()->set_log_interval(0);
  EXPECT_THAT(Validate(c), ElementsAre(HasSubstr("--log-interval 0")));
}

TEST(ValidateConfigTest, FullRecomputeNeedsMethodAndLayers) {
  Config c = SmallestValidConfig();
  c.mutable_recompute()->set_recompute_granularity("full");
  const std::vector<std::string> p = Validate(c);
  EXPECT_THAT(p, Line("--recompute-method", "--recompute-granularity full"));
  EXPECT_THAT(p, Line("--recompute-num-layers 0", "--recompute-granularity full"));
  c.mutable_recompute()->set_recompute_method("uniform");
  c.mutable_recompute()->set_recompute_num_layers(1);
  EXPECT_THAT(Validate(c), IsEmpty());
}

TEST(ValidateConfigTest, SelectiveRecomputeTakesNoMethodOrLayers) {
  Config c = SmallestValidConfig();
  c.mutable_recompute()->set_recompute_granularity("selective");
  c.mutable_recompute()->set_recompute_method("block");
  EXPECT_THAT(Validate(c), ElementsAre(AllOf(HasSubstr("--recompute-method"),
                                             HasSubstr("--recompute-granularity full"))));
  c.mutable_recompute()->clear_recompute_method();
  c.mutable_recompute()->set_recompute_num_layers(2);
  EXPECT_THAT(Validate(c), Line("--recompute-num-layers"));
}

TEST(ValidateConfigTest, RecomputeActivationsContradictsFull) {
  Config c = SmallestValidConfig();
  c.mutable_recompute()->set_recompute_activations(true);
  c.mutable_recompute()->set_recompute_granularity("full");
  EXPECT_THAT(Validate(c), Line("--recompute-activations", "--recompute-granularity full"));
}

TEST(ValidateConfigTest, RecomputeModulesAreKnown) {
  Config c = SmallestValidConfig();
  c.mutable_recompute()->set_recompute_granularity("selective");
  c.mutable_recompute()->add_recompute_modules("mlp");
  c.mutable_recompute()->add_recompute_modules("attention");
  EXPECT_THAT(Validate(c), ElementsAre(AllOf(HasSubstr("--recompute-modules 'attention'"),
                                             HasSubstr("core_attn, mlp or layernorm"))));
  c.mutable_recompute()->clear_recompute_granularity();
  EXPECT_THAT(Validate(c), Line("--recompute-modules", "selective"));
}

TEST(ValidateConfigTest, VirtualPipelineFlagsAreExclusive) {
  Config c = SmallestValidConfig();
  c.mutable_model()->set_num_layers(8);
  c.mutable_parallel()->set_pipeline_model_parallel_size(2);
  c.mutable_parallel()->set_num_layers_per_virtual_pipeline_stage(2);
  c.mutable_parallel()->set_num_virtual_stages_per_pipeline_rank(2);
  EXPECT_THAT(Validate(c, 2),
              ElementsAre(AllOf(HasSubstr("--num-layers-per-virtual-pipeline-stage"),
                                HasSubstr("--num-virtual-stages-per-pipeline-rank"),
                                HasSubstr("exclusive"))));
}

TEST(ValidateConfigTest, VirtualPipelineNeedsPipelineParallel) {
  Config c = SmallestValidConfig();
  c.mutable_parallel()->set_num_virtual_stages_per_pipeline_rank(2);
  EXPECT_THAT(Validate(c), ElementsAre(AllOf(HasSubstr("--num-virtual-stages-per-pipeline-rank"),
                                             HasSubstr("--pipeline-model-parallel-size > 1"))));
  c = SmallestValidConfig();
  c.mutable_parallel()->set_num_layers_per_virtual_pipeline_stage(1);
  EXPECT_THAT(Validate(c), Line("--num-layers-per-virtual-pipeline-stage",
                                "--pipeline-model-parallel-size > 1"));
}

TEST(ValidateConfigTest, VirtualStagesDivideTheLayers) {
  Config c = SmallestValidConfig();
  c.mutable_model()->set_num_layers(6);
  c.mutable_parallel()->set_pipeline_model_parallel_size(2);
  c.mutable_parallel()->set_num_virtual_stages_per_pipeline_rank(2);
  EXPECT_THAT(Validate(c, 2), Line("--num-layers 6", "--num-virtual-stages-per-pipeline-rank 2"));
  c.mutable_parallel()->clear_num_virtual_stages_per_pipeline_rank();
  c.mutable_parallel()->set_num_layers_per_virtual_pipeline_stage(2);  // 3 per rank
  EXPECT_THAT(Validate(c, 2), Line("--num-layers-per-virtual-pipeline-stage 2"));
}

TEST(ValidateConfigTest, DistributedTimeoutPositive) {
  Config c = SmallestValidConfig();
  c.mutable_parallel()->set_distributed_timeout_minutes(0);
  EXPECT_THAT(Validate(c), ElementsAre(HasSubstr("--distributed-timeout-minutes 0")));
}

TEST(ValidateConfigTest, SequenceParallelSplitsTheSequence) {
  Config c = SmallestValidConfig();
  c.mutable_model()->set_seq_length(130);
  c.mutable_parallel()->set_tensor_model_parallel_size(4);
  c.mutable_parallel()->set_sequence_parallel(true);
  EXPECT_THAT(Validate(c, 4),
              ElementsAre(AllOf(HasSubstr("--sequence-parallel"), HasSubstr("--seq-length 130"))));
}

TEST(ValidateConfigTest, CheckpointFlagsNeedTheirFolder) {
  Config c = SmallestValidConfig();
  c.mutable_checkpoint()->set_finetune(true);
  c.mutable_checkpoint()->set_exit_on_missing_checkpoint(true);
  const std::vector<std::string> p = Validate(c);
  EXPECT_THAT(p, Line("--finetune", "--load"));
  EXPECT_THAT(p, Line("--exit-on-missing-checkpoint", "--load"));
}

// Megatron tolerates --save-interval without --save (its recipes leave --save to the
// launch); so does Conveyor, which warns at the start that nothing is saved.
TEST(ValidateConfigTest, SaveIntervalWithoutSaveIsTolerated) {
  Config c = SmallestValidConfig();
  c.mutable_checkpoint()->set_save_interval(5);
  EXPECT_THAT(Validate(c), IsEmpty());
}

TEST(ValidateConfigTest, ReportsEveryProblemAtOnce) {
  Config c = SmallestValidConfig();
  c.mutable_model()->set_hidden_size(100);
  c.mutable_model()->set_num_attention_heads(3);
  c.mutable_training()->set_train_iters(0);
  c.mutable_logging()->set_log_interval(0);
  c.mutable_data()->set_mock_data(false);
  const std::vector<std::string> p = Validate(c);
  EXPECT_EQ(p.size(), 4u);
  EXPECT_THAT(p, Line("--hidden-size 100"));
  EXPECT_THAT(p, Line("--train-iters 0"));
  EXPECT_THAT(p, Line("--log-interval 0"));
  EXPECT_THAT(p, Line("--mock-data"));
}

TEST(ResolveConfigTest, FillsDerivedValues) {
  Config c = SmallestValidConfig();
  c.mutable_model()->set_num_layers(4);
  c.mutable_model()->set_hidden_size(256);
  c.mutable_model()->set_num_attention_heads(8);
  c.mutable_model()->set_seq_length(512);
  c.mutable_parallel()->set_tensor_model_parallel_size(2);
  c.mutable_parallel()->set_pipeline_model_parallel_size(2);
  c.mutable_training()->set_micro_batch_size(2);
  c.mutable_training()->set_global_batch_size(16);
  c.mutable_training()->set_train_iters(1000);
  c.mutable_optimizer()->set_lr_warmup_fraction(0.1f);
  c.mutable_recompute()->set_recompute_activations(true);
  SetWorld(&c, 8);
  const absl::StatusOr<Config> r = ResolveConfig(c, 8);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->model().ffn_hidden_size(), 1024);
  EXPECT_EQ(r->model().num_query_groups(), 8);
  EXPECT_EQ(r->model().kv_channels(), 32);
  EXPECT_EQ(r->model().max_position_embeddings(), 512);
  EXPECT_EQ(r->training().num_micro_batches(), 4);  // 16 / (2 * DP 2)
  EXPECT_EQ(r->training().global_batch_size(), 16);
  EXPECT_EQ(r->optimizer().lr_decay_iters(), 1000);
  EXPECT_EQ(r->optimizer().lr_warmup_iters(), 100);
  EXPECT_EQ(r->optimizer().lr_warmup_fraction(), 0);
  EXPECT_EQ(r->recompute().recompute_granularity(), "selective");
  EXPECT_THAT(r->recompute().recompute_modules(), ElementsAre("core_attn"));
  EXPECT_EQ(r->parallel().num_virtual_stages_per_pipeline_rank(), 1);
  EXPECT_EQ(r->parallel().pipeline_schedule(), "1f1b");

  // The resolved config is valid and resolves to itself.
  EXPECT_THAT(Validate(*r, 8), IsEmpty());
  const absl::StatusOr<Config> again = ResolveConfig(*r, 8);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*again, *r));
}

TEST(ResolveConfigTest, DerivesGlobalBatchAndVirtualStages) {
  Config c = SmallestValidConfig();
  c.mutable_model()->set_num_layers(8);
  c.mutable_model()->set_swiglu(true);
  c.mutable_parallel()->set_pipeline_model_parallel_size(2);
  c.mutable_parallel()->set_num_layers_per_virtual_pipeline_stage(2);
  c.mutable_training()->set_micro_batch_size(2);
  c.mutable_training()->set_num_micro_batches(4);
  c.mutable_optimizer()->set_lr_decay_iters(50);
  SetWorld(&c, 4);
  const absl::StatusOr<Config> r = ResolveConfig(c, 4);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->model().ffn_hidden_size(), 512);      // 4 * hidden, also with SwiGLU
  EXPECT_EQ(r->training().global_batch_size(), 16);  // 4 * 2 * DP 2
  EXPECT_EQ(r->training().num_micro_batches(), 4);
  EXPECT_EQ(r->optimizer().lr_decay_iters(), 50);
  EXPECT_EQ(r->parallel().num_virtual_stages_per_pipeline_rank(), 2);  // 8 / 2 / 2
  EXPECT_EQ(r->parallel().num_layers_per_virtual_pipeline_stage(), 0);
  EXPECT_EQ(r->parallel().pipeline_schedule(), "interleaved-1f1b");
  EXPECT_THAT(Validate(*r, 4), IsEmpty());

  c = SmallestValidConfig();
  const absl::StatusOr<Config> defaults = ResolveConfig(c, 1);
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->training().num_micro_batches(), 1);
  EXPECT_EQ(defaults->training().global_batch_size(), 1);
}

TEST(ResolveConfigTest, ScheduleRulesAreCheckedWithTheFlags) {
  Config c = SmallestValidConfig();
  c.mutable_model()->set_num_layers(8);
  c.mutable_parallel()->set_pipeline_model_parallel_size(2);
  c.mutable_parallel()->set_pipeline_schedule("zbv");
  c.mutable_training()->set_num_micro_batches(4);
  SetWorld(&c, 2);
  absl::StatusOr<Config> r = ResolveConfig(c, 2);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()),
              AllOf(StartsWith("--pipeline-schedule zbv: "), HasSubstr("2 model chunks"),
                    HasSubstr("--num-virtual-stages-per-pipeline-rank 2")));
  c.mutable_parallel()->set_num_virtual_stages_per_pipeline_rank(2);
  EXPECT_TRUE(ResolveConfig(c, 2).ok());

  // Interleaving takes M in whole rounds of P.
  c.mutable_parallel()->set_pipeline_schedule("interleaved-1f1b");
  c.mutable_training()->set_num_micro_batches(3);
  r = ResolveConfig(c, 2);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("--num-micro-batches 4"));
}

TEST(ResolveConfigTest, TrainSamplesGiveIterationsAndASampleSchedule) {
  Config c = SmallestValidConfig();
  c.mutable_training()->set_micro_batch_size(4);
  c.mutable_training()->set_global_batch_size(8);
  c.mutable_training()->set_train_samples(803);
  c.mutable_optimizer()->set_lr_warmup_fraction(0.1f);
  absl::StatusOr<Config> r = ResolveConfig(c, 1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->training().train_iters(), 100);  // 803 // 8, as Megatron
  EXPECT_EQ(r->optimizer().lr_decay_samples(), 803);
  EXPECT_EQ(r->optimizer().lr_warmup_samples(), 80);
  EXPECT_EQ(r->optimizer().lr_decay_iters(), 0);
  EXPECT_EQ(r->optimizer().lr_warmup_iters(), 0);
  EXPECT_THAT(Validate(*r), IsEmpty());

  // A --config file's iterations must agree, or be cleared with 0.
  c.mutable_training()->set_train_iters(60);
  EXPECT_THAT(Validate(c), ElementsAre(AllOf(StartsWith("--train-iters 60 and --train-samples 803"),
                                             HasSubstr("= 100 iterations"))));
  c.mutable_training()->set_train_iters(0);
  EXPECT_THAT(Validate(c), IsEmpty());
  c.mutable_training()->set_train_samples(7);
  EXPECT_THAT(Validate(c), ElementsAre(HasSubstr("less than one global batch (8 samples)")));
}

TEST(ValidateConfigTest, ScheduleCountsWhatTheRunCounts) {
  Config c = SmallestValidConfig();
  c.mutable_training()->set_global_batch_size(1);
  c.mutable_training()->set_train_samples(100);
  c.mutable_optimizer()->set_lr_warmup_iters(5);
  EXPECT_THAT(Validate(c), ElementsAre(AllOf(StartsWith("--lr-warmup-iters"),
                                             HasSubstr("--lr-warmup-samples"))));
  c.mutable_optimizer()->set_lr_warmup_iters(0);
  c.mutable_optimizer()->set_lr_warmup_samples(200);
  EXPECT_THAT(Validate(c), ElementsAre(StartsWith("--lr-warmup-samples 200 exceeds")));

  Config by_iterations = SmallestValidConfig();
  by_iterations.mutable_optimizer()->set_lr_decay_samples(50);
  EXPECT_THAT(Validate(by_iterations),
              ElementsAre(AllOf(StartsWith("--lr-decay-samples needs --train-samples"),
                                HasSubstr("--lr-decay-iters"))));
}

TEST(ValidateConfigTest, Fp16IsRefusedForBf16) {
  Config c = SmallestValidConfig();
  c.mutable_precision()->set_fp16(true);
  EXPECT_THAT(Validate(c), ElementsAre(AllOf(StartsWith("--fp16"), HasSubstr("--bf16"))));
}

TEST(ValidateConfigTest, RehearsalTimeNotNegative) {
  Config c = SmallestValidConfig();
  c.mutable_parallel()->set_pipeline_rehearsal_ms(-5);
  EXPECT_THAT(Validate(c), ElementsAre(StartsWith("--pipeline-rehearsal-ms")));
}

TEST(ResolveConfigTest, GroupQueryAttentionAloneMeansOneGroup) {
  Config c = SmallestValidConfig();
  c.mutable_model()->set_group_query_attention(true);
  absl::StatusOr<Config> r = ResolveConfig(c, 1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->model().num_query_groups(), 1);  // as Megatron's default
  c.mutable_model()->set_num_query_groups(2);
  r = ResolveConfig(c, 1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->model().num_query_groups(), 2);

  // Groups with GQA switched off explicitly: Megatron would ignore them.
  c.mutable_model()->set_group_query_attention(false);
  EXPECT_THAT(Validate(c), ElementsAre(AllOf(StartsWith("--num-query-groups 2"),
                                             HasSubstr("--group-query-attention=false"))));
}

TEST(ResolveConfigTest, InvalidConfigListsEveryProblem) {
  Config c = SmallestValidConfig();
  c.mutable_training()->set_train_iters(0);
  c.mutable_logging()->set_log_interval(0);
  const absl::StatusOr<Config> r = ResolveConfig(c, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  const std::vector<std::string> lines = absl::StrSplit(r.status().message(), '\n');
  EXPECT_THAT(lines, ElementsAre(HasSubstr("--train-iters"), HasSubstr("--log-interval")));
}

TEST(WorldSizeTest, FromLauncherEnvironmentOrFlags) {
  Config c;
  c.mutable_parallel()->set_nproc_per_node(4);
  c.mutable_parallel()->set_nnodes(2);
  std::map<std::string, std::string> env;
  const EnvLookup lookup = [&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  EXPECT_EQ(WorldSizeFromEnvironment(c, lookup), 8);
  env["SLURM_NTASKS"] = "16";
  EXPECT_EQ(WorldSizeFromEnvironment(c, lookup), 16);
  env["WORLD_SIZE"] = "32";
  EXPECT_EQ(WorldSizeFromEnvironment(c, lookup), 32);
  env["WORLD_SIZE"] = "many";  // malformed: reported by validation, not ignored
  EXPECT_EQ(WorldSizeFromEnvironment(c, lookup), 0);
  // One launched task (srun -n1) leaves the ranks to --nproc-per-node * --nnodes.
  env.clear();
  env["SLURM_NTASKS"] = "1";
  EXPECT_EQ(WorldSizeFromEnvironment(c, lookup), 8);
  env["WORLD_SIZE"] = "1";
  EXPECT_EQ(WorldSizeFromEnvironment(c, lookup), 8);
  c.mutable_parallel()->set_nproc_per_node(1);
  c.mutable_parallel()->set_nnodes(1);
  EXPECT_EQ(WorldSizeFromEnvironment(c, lookup), 1);
  EXPECT_THAT(Validate(SmallestValidConfig(), 0), Line("world size 0"));
}

TEST(PaddedVocabSizeTest, RoundsUpToDivisorTimesTensorParallel) {
  Config c;
  c.mutable_model()->set_vocab_size(50257);
  EXPECT_EQ(PaddedVocabSize(c), 50304);  // multiple of 128
  c.mutable_parallel()->set_tensor_model_parallel_size(2);
  EXPECT_EQ(PaddedVocabSize(c), 50432);  // multiple of 256
  c.mutable_model()->set_vocab_size(512);
  EXPECT_EQ(PaddedVocabSize(c), 512);
}

}  // namespace
}  // namespace conveyor
