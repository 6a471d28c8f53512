// A mixture-of-experts layer: its input, weight and auxiliary-loss gradients against
// central finite differences (alone and inside a transformer layer), its dispatch plan
// worked by hand, and its output against the dense MLP it must reduce to.
#include "model/moe_layer.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/moe_dispatch.h"
#include "model/moe_layer_pattern.h"
#include "model/transformer_layer.h"
#include "runtime/cpu/cpu_ops.h"
#include "runtime/philox.h"
#include "tests/model/grad_check.h"
#include "tests/model/test_shapes.h"

namespace conveyor {
namespace {

using testing_util::GradTarget;

Tensor RandomTensor(std::vector<int64_t> shape, uint64_t stream, float std) {
  Tensor t = Tensor::Zeros(std::move(shape), MemoryCategory::kActivations);
  const CounterRng rng(99, stream);
  for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] = std * rng.Normal(i);
  return t;
}

double Dot(const Tensor& a, const Tensor& b) {
  double sum = 0.0;
  for (int64_t i = 0; i < a.numel(); ++i) sum += double{a.data()[i]} * b.data()[i];
  return sum;
}

ModelShape MoeShape4(const std::string& variant) {
  ModelShape s = testing_util::TinyShape();
  s.linear_bias = false;
  s.moe.router.experts = 4;
  s.moe.router.topk = 2;
  s.moe.ffn_hidden = 12;
  s.moe.layers = {true, true};
  s.moe.aux_loss_coeff = 0.3f;
  s.moe.z_loss_coeff = 0.05f;
  if (variant == "sigmoid_seq_aux_shared_swiglu") {
    s.swiglu = true;
    s.moe.router.score = RouterScore::kSigmoid;
    s.moe.router.scaling_factor = 1.5f;
    s.moe.seq_aux_loss_coeff = s.moe.aux_loss_coeff;  // both losses, as Megatron's list form
    s.moe.shared_expert_ffn = 8;
  } else if (variant == "softmax_gated_shared_swiglu") {
    s.swiglu = true;
    s.moe.shared_expert_ffn = 8;
    s.moe.shared_expert_gate = true;
  } else if (variant == "pre_softmax_drop_probs_padded") {
    s.moe.router.pre_softmax = true;
    s.moe.capacity_factor = 0.75f;
    s.moe.pad_to_capacity = true;
  } else if (variant == "sigmoid_expert_bias") {
    s.moe.router.score = RouterScore::kSigmoid;
    s.moe.expert_bias = true;
    s.moe.bias_update_rate = 0.01f;
  } else if (variant == "drop_position_top1") {
    s.moe.router.topk = 1;
    s.moe.capacity_factor = 1.0f;
    s.moe.drop_policy = TokenDropPolicy::kPosition;
  }
  return s;
}

// The routing decisions of a forward: a finite difference is only meaningful while a
// perturbation leaves them alone.
struct Decisions {
  std::vector<int32_t> experts;
  std::vector<uint8_t> keep;
  bool operator==(const Decisions& o) const { return experts == o.experts && keep == o.keep; }
};

class MoeLayerGradTest : public ::testing::TestWithParam<std::string> {};

TEST_P(MoeLayerGradTest, InputWeightAndAuxiliaryGradientsMatchFiniteDifferences) {
  const ModelShape shape = MoeShape4(GetParam());
  ParameterStore store(/*seed=*/5);
  const TensorParallel one_rank;
  MoeLayer layer(&CpuOps::Get(), &store, "layers.0.mlp", shape, one_rank);
  const MicroBatchContext mb{/*iteration=*/1, /*first_sample=*/0, /*batch=*/2, shape.seq};
  Tensor x = RandomTensor({mb.tokens(), shape.hidden}, 1, 1.0f);
  const Tensor r = RandomTensor({mb.tokens(), shape.hidden}, 2, 1.0f);
  // loss = sum(y * r) + each load-balancing loss and the z-loss times its coefficient.
  Decisions base;
  int changed_routing = 0;
  auto run = [&](MoeStash* stash) {
    const Tensor y = layer.Forward(x, mb, stash).value();
    const RouterLosses& l = stash->router.losses;
    return Dot(y, r) + shape.moe.aux_loss_coeff * l.load_balancing +
           shape.moe.seq_aux_loss_coeff * l.seq_load_balancing + shape.moe.z_loss_coeff * l.z;
  };
  auto loss = [&]() {
    MoeStash stash;
    const double l = run(&stash);
    changed_routing += !(Decisions{stash.router.routing.experts, stash.router.keep} == base);
    return l;
  };

  MoeStash stash;
  if (layer.expert_bias() != nullptr) {
    // A bias that changes some tokens' choice: the check then differentiates through
    // the routing the bias picked.
    run(&stash);
    const std::vector<int32_t> unbiased = stash.router.routing.experts;
    const float bias[] = {-0.05f, 0.0f, 0.05f, 0.1f};
    std::copy(bias, bias + 4, layer.expert_bias()->mutable_values());
    stash = MoeStash();
    run(&stash);
    EXPECT_NE(stash.router.routing.experts, unbiased) << "the bias changed no choice";
    stash = MoeStash();
  }
  run(&stash);
  base = {stash.router.routing.experts, stash.router.keep};
  if (shape.moe.drops_tokens()) {
    EXPECT_NE(std::count(base.keep.begin(), base.keep.end(), 0), 0) << "nothing dropped";
  }
  EXPECT_GT(stash.router.losses.load_balancing, 0.0);
  EXPECT_GT(stash.router.losses.z, 0.0);
  if (shape.moe.seq_aux_loss_coeff > 0) {
    EXPECT_GT(stash.router.losses.seq_load_balancing, 0.0);
  }
  const Tensor dx = layer.BackwardInput(x, r, /*aux_loss_scale=*/1.0f, &stash).value();
  layer.BackwardWeight(&stash);

  std::vector<GradTarget> targets = testing_util::ParameterTargets(
      store.parameters(), {{"input", x.data(), dx.data(), x.numel()}});
  EXPECT_GT(testing_util::MaxAbsGradient(targets), 1e-2f);
  testing_util::GradCheckOptions options;
  options.eps = 2e-3f;  // small enough to leave the routing as it is
  options.abs_tol = 2e-3f;
  options.samples_per_target = 8;
  for (const std::string& problem : testing_util::CheckGradients(loss, targets, options)) {
    ADD_FAILURE() << GetParam() << ": " << problem;
  }
  EXPECT_EQ(changed_routing, 0) << "a perturbation changed the routing: pick other inputs";
}

INSTANTIATE_TEST_SUITE_P(Variants, MoeLayerGradTest,
                         ::testing::Values("softmax_aux_gelu", "sigmoid_seq_aux_shared_swiglu",
                                           "softmax_gated_shared_swiglu",
                                           "pre_softmax_drop_probs_padded", "drop_position_top1",
                                           "sigmoid_expert_bias"));

// The expert bias (auxiliary-loss-free balancing) decides which experts a token gets but
// not their weights: with a bias of 1 on expert 3 (sigmoid scores lie in (0, 1)) every
// token picks it, and each token's weights are still its unbiased sigmoid scores
// normalised over its picks, computed here from the router's logits. W counts the kept
// tokens per expert for the bias update.
TEST(MoeLayerTest, ExpertBiasSteersTheChoiceNotTheWeights) {
  const ModelShape shape = MoeShape4("sigmoid_expert_bias");
  ParameterStore store(/*seed=*/5);
  const TensorParallel one_rank;
  MoeLayer layer(&CpuOps::Get(), &store, "layers.0.mlp", shape, one_rank);
  ASSERT_NE(layer.expert_bias(), nullptr);
  EXPECT_EQ(layer.expert_bias()->name(), "layers.0.mlp.router.expert_bias");
  const MicroBatchContext mb{/*iteration=*/1, /*first_sample=*/0, /*batch=*/2, shape.seq};
  const Tensor x = RandomTensor({mb.tokens(), shape.hidden}, 1, 1.0f);
  layer.expert_bias()->mutable_values()[3] = 1.0f;
  MoeStash stash;
  ASSERT_TRUE(layer.Forward(x, mb, &stash).ok());
  const std::vector<float>& logits = stash.router.logits;
  const TopKRouting& routing = stash.router.routing;
  const int64_t experts = 4, k = 2;
  int64_t unbiased_choice_differs = 0;
  for (int64_t t = 0; t < mb.tokens(); ++t) {
    auto sigmoid = [&](int64_t e) {
      return 1.0 / (1.0 + std::exp(-double{logits[t * experts + e]}));
    };
    const int32_t a = routing.experts[t * k], b = routing.experts[t * k + 1];
    EXPECT_TRUE(a == 3 || b == 3) << "token " << t << " picked " << a << ", " << b;
    // Without the bias: the two highest sigmoid scores.
    int64_t best = 0;
    for (int64_t e = 1; e < experts; ++e) best = sigmoid(e) > sigmoid(best) ? e : best;
    int64_t second = best == 0 ? 1 : 0;
    for (int64_t e = 0; e < experts; ++e) {
      if (e != best && sigmoid(e) > sigmoid(second)) second = e;
    }
    unbiased_choice_differs += (best != 3 && second != 3);
    const double sum = sigmoid(a) + sigmoid(b);
    EXPECT_NEAR(routing.probs[t * k], sigmoid(a) / sum, 1e-6) << "token " << t;
    EXPECT_NEAR(routing.probs[t * k + 1], sigmoid(b) / sum, 1e-6) << "token " << t;
  }
  EXPECT_GT(unbiased_choice_differs, 0) << "the bias changed no token's choice";
  const Tensor dy = RandomTensor({mb.tokens(), shape.hidden}, 2, 1.0f);
  ASSERT_TRUE(layer.BackwardInput(x, dy, /*aux_loss_scale=*/1.0f, &stash).ok());
  layer.BackwardWeight(&stash);
  const absl::Span<const float> counted = layer.expert_bias()->step_tokens();
  EXPECT_EQ(counted[3], mb.tokens());  // every token's slot for expert 3, none dropped
  EXPECT_EQ(counted[0] + counted[1] + counted[2] + counted[3], mb.tokens() * k);
}

TEST(MoeLayerTest, AuxiliaryLossGradientsScaleWithTheLossWeight) {
  // BackwardInput's aux_loss_scale multiplies only the auxiliary losses' part of dx.
  const ModelShape shape = MoeShape4("softmax_aux_gelu");
  ParameterStore store(5);
  const TensorParallel one_rank;
  MoeLayer layer(&CpuOps::Get(), &store, "layers.0.mlp", shape, one_rank);
  const MicroBatchContext mb{1, 0, 2, shape.seq};
  const Tensor x = RandomTensor({mb.tokens(), shape.hidden}, 1, 1.0f);
  const Tensor zero = Tensor::Zeros({mb.tokens(), shape.hidden}, MemoryCategory::kActivations);
  std::vector<std::vector<float>> dx_at;
  for (const float scale : {0.0f, 0.25f, 0.5f}) {
    MoeStash stash;
    ASSERT_TRUE(layer.Forward(x, mb, &stash).ok());
    const Tensor dx = layer.BackwardInput(x, zero, scale, &stash).value();
    dx_at.emplace_back(dx.data(), dx.data() + dx.numel());
  }
  double largest = 0.0;
  for (size_t i = 0; i < dx_at[0].size(); ++i) {
    EXPECT_EQ(dx_at[0][i], 0.0f);
    EXPECT_NEAR(dx_at[2][i], 2.0f * dx_at[1][i], 1e-7);
    largest = std::max(largest, std::fabs(double{dx_at[2][i]}));
  }
  EXPECT_GT(largest, 1e-4);
}

TEST(MoeLayerTest, InsideATransformerLayerGradientsMatchFiniteDifferences) {
  const ModelShape shape = MoeShape4("sigmoid_seq_aux_shared_swiglu");
  ParameterStore store(3);
  const TensorParallel one_rank;
  TransformerLayer layer(&CpuOps::Get(), &store, shape, /*layer_index=*/1, nullptr, 3, &one_rank);
  ASSERT_NE(store.Find("layers.1.mlp.experts.3.fc2.weight"), nullptr);
  ASSERT_NE(store.Find("layers.1.mlp.router.weight"), nullptr);
  ASSERT_EQ(store.Find("layers.1.mlp.fc1.weight"), nullptr);
  const MicroBatchContext mb{1, 0, 2, shape.seq};
  Tensor x = RandomTensor({mb.tokens(), shape.hidden}, 3, 1.0f);
  const Tensor r = RandomTensor({mb.tokens(), shape.hidden}, 4, 1.0f);
  // Without auxiliary losses in the loss, their gradients must be off: scale 0.
  layer.SetAuxLossScale(0.0f);
  auto loss = [&]() {
    LayerStash stash;
    return Dot(*layer.Forward(x, mb, &stash), r);
  };
  LayerStash stash;
  ASSERT_TRUE(layer.Forward(x, mb, &stash).ok());
  const Tensor dx = *layer.BackwardInput(r, mb, &stash);
  layer.BackwardWeight(&stash);
  std::vector<GradTarget> targets = testing_util::ParameterTargets(
      store.parameters(), {{"input", x.data(), dx.data(), x.numel()}});
  testing_util::GradCheckOptions options;
  options.eps = 2e-3f;
  options.abs_tol = 2e-3f;
  for (const std::string& problem : testing_util::CheckGradients(loss, targets, options)) {
    ADD_FAILURE() << problem;
  }
}

TEST(MoeLayerTest, TwoIdenticalExpertsTopTwoAreTheDenseMlp) {
  // Softmax over both picked logits gives weights summing to 1, so two experts holding
  // the dense MLP's weights reproduce the dense layer exactly.
  ModelShape dense = testing_util::TinyShape();
  dense.linear_bias = false;
  dense.swiglu = true;
  ModelShape moe = dense;
  moe.moe.router.experts = 2;
  moe.moe.router.topk = 2;
  moe.moe.ffn_hidden = dense.ffn_hidden;
  moe.moe.layers = {true, true};
  ParameterStore dense_store(8), moe_store(8);
  const TensorParallel one_rank;
  TransformerLayer dense_layer(&CpuOps::Get(), &dense_store, dense, 0, nullptr, 8, &one_rank);
  TransformerLayer moe_layer(&CpuOps::Get(), &moe_store, moe, 0, nullptr, 8, &one_rank);
  for (Parameter* p : moe_store.parameters()) {
    std::string name = p->name;
    for (const char* expert : {".experts.0", ".experts.1"}) {
      const size_t at = name.find(expert);
      if (at != std::string::npos) name.erase(at, std::string(expert).size());
    }
    if (Parameter* source = dense_store.Find(name)) p->value.CopyFrom(source->value);
  }
  const MicroBatchContext mb{1, 0, 2, dense.seq};
  const Tensor x = RandomTensor({mb.tokens(), dense.hidden}, 5, 1.0f);
  LayerStash dense_stash, moe_stash;
  const Tensor y_dense = *dense_layer.Forward(x, mb, &dense_stash);
  const Tensor y_moe = *moe_layer.Forward(x, mb, &moe_stash);
  for (int64_t i = 0; i < y_dense.numel(); ++i) {
    EXPECT_NEAR(y_moe.data()[i], y_dense.data()[i], 1e-5) << i;
  }
}

TEST(DispatchPlanTest, HandWorkedLayout) {
  // Three tokens, top-2 over three experts: picks (0: e2, e0), (1: e0, e1), (2: e2, e1);
  // expert 0 drops token 1's slot.
  const std::vector<int32_t> experts = {2, 0, 0, 1, 2, 1};
  const std::vector<uint8_t> keep = {1, 1, 0, 1, 1, 1};
  const DispatchPlan plan = PlanDispatch(experts, keep, 2, 3, /*pad_rows=*/0);
  EXPECT_EQ(plan.expert_begin, (std::vector<int64_t>{0, 1, 3, 5}));
  EXPECT_EQ(plan.token_of_row, (std::vector<int32_t>{0, 1, 2, 0, 2}));
  EXPECT_EQ(plan.slot_of_row, (std::vector<int32_t>{1, 3, 5, 0, 4}));
  EXPECT_EQ(plan.row_of_slot, (std::vector<int32_t>{3, 0, -1, 1, 4, 2}));
  EXPECT_EQ(plan.TokensPerExpert(), (std::vector<int64_t>{1, 2, 2}));
  // Padded to two rows per expert: expert 0 gets a zero row.
  const DispatchPlan padded = PlanDispatch(experts, keep, 2, 3, 2);
  EXPECT_EQ(padded.expert_begin, (std::vector<int64_t>{0, 2, 4, 6}));
  EXPECT_EQ(padded.token_of_row, (std::vector<int32_t>{0, -1, 1, 2, 0, 2}));
  EXPECT_EQ(padded.row_of_slot, (std::vector<int32_t>{4, 0, -1, 2, 5, 3}));
  EXPECT_EQ(padded.TokensPerExpert(), (std::vector<int64_t>{1, 2, 2}));
}

TEST(MoeLayerFreqTest, IntegersAndListExpressions) {
  EXPECT_EQ(*ParseMoeLayerFreq("2", 5), (std::vector<bool>{true, false, true, false, true}));
  EXPECT_EQ(*ParseMoeLayerFreq("([1]*3+[0]*1)*2", 8),
            (std::vector<bool>{true, true, true, false, true, true, true, false}));
  EXPECT_EQ(*ParseMoeLayerFreq("[0]+[1]*3", 4), (std::vector<bool>{false, true, true, true}));
  EXPECT_EQ(*ParseMoeLayerFreq(" [1, 0] * 2 ", 4), (std::vector<bool>{true, false, true, false}));
  for (const char* bad : {"0", "[1,0]", "[1,2,1]", "[1,0,1", "([1]*2", "[1]*x", "abc"}) {
    const absl::StatusOr<std::vector<bool>> parsed = ParseMoeLayerFreq(bad, 3);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_NE(parsed.status().message().find("--moe-layer-freq"), std::string::npos) << bad;
  }
}

// Expressions that expand to billions of entries are refused by their length before a
// list that long is built (they ended in std::bad_alloc), and so is repeating nothing
// forever.
TEST(MoeLayerFreqTest, RefusesExpansionsLongerThanTheModel) {
  const absl::StatusOr<std::vector<bool>> repeated = ParseMoeLayerFreq("([1]*1000000000)", 4);
  ASSERT_FALSE(repeated.ok());
  EXPECT_EQ(repeated.status().message(),
            "--moe-layer-freq '([1]*1000000000)' repeats 1 entries 1000000000 times (at "
            "character 15): more entries than --num-layers 4; give one 0 or 1 per layer");
  const absl::StatusOr<std::vector<bool>> nested =
      ParseMoeLayerFreq("([0]*3000000000)*3000000000", 4);
  ASSERT_FALSE(nested.ok());
  EXPECT_NE(nested.status().message().find("repeats 1 entries 3000000000 times"),
            std::string::npos);
  const absl::StatusOr<std::vector<bool>> joined = ParseMoeLayerFreq("[1]*3+[0]*2", 4);
  ASSERT_FALSE(joined.ok());
  EXPECT_NE(joined.status().message().find("joins 3 and 2 entries"), std::string::npos);
  const absl::StatusOr<std::vector<bool>> empty =
      ParseMoeLayerFreq("([1]*0)*9000000000000000000+[1]*4", 4);
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(*empty, std::vector<bool>(4, true));
  EXPECT_EQ(*ParseMoeLayerFreq("[1]*4", 4), std::vector<bool>(4, true));  // exactly fits
}

}  // namespace
}  // namespace conveyor
