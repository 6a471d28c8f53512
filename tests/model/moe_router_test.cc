// The router's math (model/moe_routing.h) against references written here from
// Megatron's formulas (moe_utils.py: topk_routing_with_score_function,
// switch_load_balancing_loss_func, z_loss_func, apply_router_token_dropping), and its
// gradients against central finite differences.
#include "model/moe_routing.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/philox.h"

namespace conveyor {
namespace {

constexpr int64_t kTokens = 6;
constexpr int64_t kExperts = 5;

std::vector<float> RandomLogits(int64_t tokens, int64_t experts, uint64_t stream) {
  const CounterRng rng(7, stream);
  std::vector<float> logits(tokens * experts);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = 1.5f * rng.Normal(i);
  return logits;
}

// Reference top-k routing of one token, in double: every expert ranked by a full sort.
struct ReferencePicks {
  std::vector<int> experts;
  std::vector<double> probs;
};
ReferencePicks ReferenceRoute(const RouterSpec& spec, const float* row) {
  std::vector<double> score(kExperts);
  if (spec.score == RouterScore::kSigmoid) {
    for (int e = 0; e < kExperts; ++e) score[e] = 1.0 / (1.0 + std::exp(-double{row[e]}));
  } else if (spec.pre_softmax) {
    double z = 0.0;
    for (int e = 0; e < kExperts; ++e) z += std::exp(double{row[e]});
    for (int e = 0; e < kExperts; ++e) score[e] = std::exp(double{row[e]}) / z;
  } else {
    for (int e = 0; e < kExperts; ++e) score[e] = row[e];
  }
  std::vector<int> order(kExperts);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return score[a] > score[b]; });
  ReferencePicks out;
  out.experts.assign(order.begin(), order.begin() + spec.topk);
  for (int e : out.experts) out.probs.push_back(score[e]);
  if (spec.score == RouterScore::kSoftmax && !spec.pre_softmax) {
    // Softmax over the picked logits.
    double z = 0.0;
    for (double& p : out.probs) z += p = std::exp(p);
    for (double& p : out.probs) p /= z;
  } else if (spec.score == RouterScore::kSigmoid && spec.topk > 1) {
    const double sum = std::accumulate(out.probs.begin(), out.probs.end(), 0.0);
    for (double& p : out.probs) p /= sum;
  }
  if (spec.scaling_factor > 0) {
    for (double& p : out.probs) p *= spec.scaling_factor;
  }
  return out;
}

struct RouterVariant {
  std::string name;
  RouterSpec spec;
};

std::vector<RouterVariant> Variants() {
  auto spec = [](int64_t topk, RouterScore score, bool pre, float scaling) {
    RouterSpec s;
    s.experts = kExperts;
    s.topk = topk;
    s.score = score;
    s.pre_softmax = pre;
    s.scaling_factor = scaling;
    return s;
  };
  return {
      {"softmax_top2", spec(2, RouterScore::kSoftmax, false, 0)},
      {"pre_softmax_top2", spec(2, RouterScore::kSoftmax, true, 0)},
      {"pre_softmax_top3_scaled", spec(3, RouterScore::kSoftmax, true, 2.5f)},
      {"sigmoid_top2", spec(2, RouterScore::kSigmoid, false, 0)},
      {"sigmoid_top1_scaled", spec(1, RouterScore::kSigmoid, false, 1.5f)},
  };
}

// d(f)/d(logits) by central differences; the step actually taken in fp32 is the divisor.
std::vector<double> FiniteDifferences(const std::function<double(const std::vector<float>&)>& f,
                                      std::vector<float> logits) {
  std::vector<double> grad(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    const float saved = logits[i];
    logits[i] = saved + 1e-3f;
    const float up = logits[i];
    const double f_up = f(logits);
    logits[i] = saved - 1e-3f;
    const float down = logits[i];
    const double f_down = f(logits);
    logits[i] = saved;
    grad[i] = (f_up - f_down) / (double{up} - double{down});
  }
  return grad;
}

void ExpectGradientsMatch(const std::vector<double>& fd, const std::vector<float>& analytic) {
  double largest = 0.0;
  for (size_t i = 0; i < fd.size(); ++i) {
    EXPECT_NEAR(analytic[i], fd[i], 2e-4 + 1e-3 * std::abs(fd[i])) << "logit " << i;
    largest = std::max(largest, std::abs(fd[i]));
  }
  EXPECT_GT(largest, 1e-3) << "gradient too small to test anything";
}

class RouterTest : public ::testing::TestWithParam<RouterVariant> {};

TEST_P(RouterTest, TopKMatchesTheReference) {
  const RouterSpec& spec = GetParam().spec;
  const std::vector<float> logits = RandomLogits(kTokens, kExperts, 1);
  const TopKRouting routing = RouteTopK(spec, logits, {});
  for (int64_t t = 0; t < kTokens; ++t) {
    const ReferencePicks ref = ReferenceRoute(spec, logits.data() + t * kExperts);
    for (int64_t j = 0; j < spec.topk; ++j) {
      EXPECT_EQ(routing.experts[t * spec.topk + j], ref.experts[j]) << "token " << t;
      EXPECT_NEAR(routing.probs[t * spec.topk + j], ref.probs[j], 1e-6) << "token " << t;
    }
  }
}

TEST_P(RouterTest, TopKGradientMatchesFiniteDifferences) {
  const RouterSpec& spec = GetParam().spec;
  const std::vector<float> logits = RandomLogits(kTokens, kExperts, 1);
  const std::vector<float> r = RandomLogits(kTokens, kExperts, 2);  // a weight per (t, e)
  const TopKRouting base = RouteTopK(spec, logits, {});
  // loss = sum over slots of p[t, j] * r[t, e(t, j)]: keyed by expert, so the order of a
  // token's picks does not matter; the picks themselves must not change.
  auto loss = [&](const std::vector<float>& l) {
    const TopKRouting routing = RouteTopK(spec, l, {});
    double sum = 0.0;
    for (size_t s = 0; s < routing.probs.size(); ++s) {
      const int64_t t = static_cast<int64_t>(s) / spec.topk;
      sum += double{routing.probs[s]} * r[t * kExperts + routing.experts[s]];
    }
    return sum;
  };
  std::vector<float> d_probs(base.probs.size());
  for (size_t s = 0; s < d_probs.size(); ++s) {
    d_probs[s] = r[(s / spec.topk) * kExperts + base.experts[s]];
  }
  std::vector<float> d_logits(logits.size(), 0.0f);
  RouteTopKBackward(spec, logits, base, d_probs, absl::MakeSpan(d_logits));
  if (spec.topk == 1 && spec.score == RouterScore::kSoftmax && !spec.pre_softmax) return;
  ExpectGradientsMatch(FiniteDifferences(loss, logits), d_logits);
}

// Megatron's switch_load_balancing_loss_func over `groups` groups of tokens (one for
// aux_loss, one per sequence for seq_aux_loss), from its formula with dense maps.
double ReferenceLoadBalancing(const RouterSpec& spec, const std::vector<float>& logits,
                              int64_t groups) {
  const int64_t per_group = kTokens / groups;
  double loss = 0.0;
  for (int64_t g = 0; g < groups; ++g) {
    std::vector<double> tokens_per_expert(kExperts, 0.0), probs_per_expert(kExperts, 0.0);
    for (int64_t t = g * per_group; t < (g + 1) * per_group; ++t) {
      std::vector<double> s(kExperts);
      double z = 0.0;
      for (int e = 0; e < kExperts; ++e) {
        const double l = logits[t * kExperts + e];
        s[e] = spec.score == RouterScore::kSoftmax ? std::exp(l) : 1.0 / (1.0 + std::exp(-l));
        z += s[e];
      }
      for (int e = 0; e < kExperts; ++e) s[e] /= z;  // softmax, or normalised sigmoids
      std::vector<int> order(kExperts);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return s[a] > s[b]; });
      for (int j = 0; j < spec.topk; ++j) tokens_per_expert[order[j]] += 1.0;
      for (int e = 0; e < kExperts; ++e) probs_per_expert[e] += s[e];
    }
    double sum = 0.0;
    for (int e = 0; e < kExperts; ++e) sum += probs_per_expert[e] * tokens_per_expert[e];
    loss += sum * kExperts / (double(spec.topk) * per_group * per_group);
  }
  return loss / groups;
}

TEST_P(RouterTest, LoadBalancingLossesMatchTheReferenceAndTheirGradients) {
  const RouterSpec& spec = GetParam().spec;
  const std::vector<float> logits = RandomLogits(kTokens, kExperts, 3);
  for (const int64_t groups : {int64_t{1}, int64_t{2}, int64_t{3}}) {
    SCOPED_TRACE(groups);
    std::vector<float> d_logits(logits.size(), 0.0f);
    const double loss = LoadBalancingLoss(spec, logits, groups, 1.0f, absl::MakeSpan(d_logits));
    EXPECT_NEAR(loss, ReferenceLoadBalancing(spec, logits, groups), 1e-9);
    auto f = [&](const std::vector<float>& l) { return LoadBalancingLoss(spec, l, groups, 1, {}); };
    ExpectGradientsMatch(FiniteDifferences(f, logits), d_logits);
  }
}

// DeepSeek-V3's sequence-wise balance loss (technical report, eqs. 17-20), written as
// published: per sequence of T tokens, f_i = N_r / (K_r T) * sum_t 1(s_it in TopK(s_t)),
// s'_it = s_it / sum_j s_jt, P_i = (1/T) sum_t s'_it, L = sum_i f_i P_i; the micro-batch's
// loss is the mean over its sequences (Megatron's seq_aux_loss divides by the batch).
TEST_P(RouterTest, SequenceLossIsDeepSeekV3sFormula) {
  const RouterSpec& spec = GetParam().spec;
  constexpr int64_t kSequences = 2, kT = kTokens / kSequences;
  const std::vector<float> logits = RandomLogits(kTokens, kExperts, 9);
  double mean = 0.0;
  for (int64_t q = 0; q < kSequences; ++q) {
    std::vector<double> f(kExperts, 0.0), p(kExperts, 0.0);
    for (int64_t t = q * kT; t < (q + 1) * kT; ++t) {
      std::vector<double> s(kExperts);
      for (int e = 0; e < kExperts; ++e) {
        const double l = logits[t * kExperts + e];
        s[e] = spec.score == RouterScore::kSigmoid ? 1.0 / (1.0 + std::exp(-l)) : std::exp(l);
      }
      const double sum = std::accumulate(s.begin(), s.end(), 0.0);
      std::vector<int> order(kExperts);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return s[a] > s[b]; });
      for (int j = 0; j < spec.topk; ++j) f[order[j]] += double(kExperts) / (spec.topk * kT);
      for (int e = 0; e < kExperts; ++e) p[e] += s[e] / sum / kT;
    }
    for (int e = 0; e < kExperts; ++e) mean += f[e] * p[e] / kSequences;
  }
  EXPECT_NEAR(LoadBalancingLoss(spec, logits, kSequences, 1.0f, {}), mean, 1e-12);
}

// The statistics the global loss reads, and the gradient of a form bilinear in them.
TEST_P(RouterTest, ExpertLoadAndItsScoresGradient) {
  const RouterSpec& spec = GetParam().spec;
  const std::vector<float> logits = RandomLogits(kTokens, kExperts, 11);
  const std::vector<double> weight = {0.7, -0.2, 1.3, 0.4, -0.9};
  // The reference: the same scores as ReferenceLoadBalancing's, per token.
  auto scores = [&](const std::vector<float>& l) {
    std::vector<double> sums(kExperts, 0.0), counts(kExperts, 0.0);
    for (int64_t t = 0; t < kTokens; ++t) {
      std::vector<double> s(kExperts);
      for (int e = 0; e < kExperts; ++e) {
        const double v = l[t * kExperts + e];
        s[e] = spec.score == RouterScore::kSigmoid ? 1.0 / (1.0 + std::exp(-v)) : std::exp(v);
      }
      const double z = std::accumulate(s.begin(), s.end(), 0.0);
      std::vector<int> order(kExperts);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return s[a] > s[b]; });
      for (int j = 0; j < spec.topk; ++j) counts[order[j]] += 1.0;
      for (int e = 0; e < kExperts; ++e) sums[e] += s[e] / z;
    }
    return std::make_pair(counts, sums);
  };
  const ExpertLoad load = MeasureExpertLoad(spec, logits);
  const auto [counts, sums] = scores(logits);
  for (int e = 0; e < kExperts; ++e) {
    EXPECT_EQ(load.counts[e], counts[e]);
    EXPECT_NEAR(load.scores[e], sums[e], 1e-12);
  }
  std::vector<float> d_logits(logits.size(), 0.0f);
  AddExpertScoresBackward(spec, logits, weight, 2.0, absl::MakeSpan(d_logits));
  auto f = [&](const std::vector<float>& l) {
    const std::vector<double> p = scores(l).second;
    double v = 0.0;
    for (int e = 0; e < kExperts; ++e) v += 2.0 * weight[e] * p[e];
    return v;
  };
  ExpectGradientsMatch(FiniteDifferences(f, logits), d_logits);
}

INSTANTIATE_TEST_SUITE_P(Scores, RouterTest, ::testing::ValuesIn(Variants()),
                         [](const ::testing::TestParamInfo<RouterVariant>& v) {
                           return v.param.name;
                         });

TEST(ZLossTest, MatchesTheFormulaAndItsGradient) {
  const std::vector<float> logits = RandomLogits(kTokens, kExperts, 4);
  double reference = 0.0;
  for (int64_t t = 0; t < kTokens; ++t) {
    double z = 0.0;
    for (int e = 0; e < kExperts; ++e) z += std::exp(double{logits[t * kExperts + e]});
    reference += std::log(z) * std::log(z) / kTokens;
  }
  std::vector<float> d_logits(logits.size(), 0.0f);
  EXPECT_NEAR(ZLoss(kExperts, logits, 1.0f, absl::MakeSpan(d_logits)), reference, 1e-9);
  auto f = [](const std::vector<float>& l) { return ZLoss(kExperts, l, 1.0f, {}); };
  ExpectGradientsMatch(FiniteDifferences(f, logits), d_logits);
}

TEST(RouteTopKTest, EqualScoresGoToTheLowerExpert) {
  RouterSpec spec;
  spec.experts = 4;
  spec.topk = 2;
  const std::vector<float> logits = {0.5f, 1.0f, 1.0f, 1.0f};
  EXPECT_EQ(RouteTopK(spec, logits, {}).experts, (std::vector<int32_t>{1, 2}));
  spec.score = RouterScore::kSigmoid;
  // The bias steers the selection (expert 0 wins) but not the weights.
  const TopKRouting biased = RouteTopK(spec, logits, std::vector<float>{1.0f, 0.0f, 0.0f, 0.1f});
  EXPECT_EQ(biased.experts, (std::vector<int32_t>{0, 3}));
  const double g0 = 1.0 / (1.0 + std::exp(-0.5)), g3 = 1.0 / (1.0 + std::exp(-1.0));
  EXPECT_NEAR(biased.probs[0], g0 / (g0 + g3), 1e-6);
}

// Group-limited routing (Megatron's group_limited_topk, DeepSeek-V3's node-limited
// routing), written from its definition in double: the experts form `groups` contiguous
// groups; a group scores the sum of its `score_topk` best values (the values the
// selection ranks: sigmoid scores plus bias, softmax probabilities or logits; Megatron
// sums topk / group_topk of them, transformers' DeepseekV3TopkRouter 2); the group_topk
// best groups (ties to the lower group) are the only ones whose experts count.
std::vector<int> ReferenceGroupLimitedPicks(const std::vector<double>& values, int64_t groups,
                                            int64_t group_topk, int64_t topk, int64_t score_topk) {
  const int64_t size = static_cast<int64_t>(values.size()) / groups;
  std::vector<std::pair<double, int64_t>> scored;  // (-score, group): ascending is best first
  for (int64_t g = 0; g < groups; ++g) {
    std::vector<double> members(values.begin() + g * size, values.begin() + (g + 1) * size);
    std::sort(members.rbegin(), members.rend());
    scored.push_back({-std::accumulate(members.begin(), members.begin() + score_topk, 0.0), g});
  }
  std::sort(scored.begin(), scored.end());
  std::vector<int> allowed;
  for (int64_t i = 0; i < group_topk; ++i) {
    for (int64_t e = 0; e < size; ++e) allowed.push_back(int(scored[i].second * size + e));
  }
  std::sort(allowed.begin(), allowed.end());
  std::stable_sort(allowed.begin(), allowed.end(),
                   [&](int a, int b) { return values[a] > values[b]; });
  return std::vector<int>(allowed.begin(), allowed.begin() + topk);
}

// 8 experts in 4 groups, 2 groups per token, top-4 (each group scored by its best two),
// for each score function: the experts and weights of the reference picks, and some
// token whose picks differ from ungrouped routing (so the limit is exercised).
TEST(GroupLimitedRoutingTest, PicksTheReferenceGroupsAndExperts) {
  constexpr int64_t kGroupTokens = 24, kGroupExperts = 8;
  const std::vector<float> logits = RandomLogits(kGroupTokens, kGroupExperts, 41);
  std::vector<float> bias(kGroupExperts);
  for (int64_t e = 0; e < kGroupExperts; ++e) bias[e] = 0.05f * float(e % 3);
  for (const auto& [score, pre] : {std::pair{RouterScore::kSigmoid, false},
                                   std::pair{RouterScore::kSoftmax, true},
                                   std::pair{RouterScore::kSoftmax, false}}) {
    RouterSpec spec;
    spec.experts = kGroupExperts;
    spec.topk = 4;
    spec.score = score;
    spec.pre_softmax = pre;
    spec.scaling_factor = 2.5f;
    spec.num_groups = 4;
    spec.group_topk = 2;
    const bool sigmoid = score == RouterScore::kSigmoid;
    const std::vector<float> steer = sigmoid ? bias : std::vector<float>();
    const TopKRouting got = RouteTopK(spec, logits, steer);
    RouterSpec ungrouped = spec;
    ungrouped.num_groups = ungrouped.group_topk = 0;
    const TopKRouting free = RouteTopK(ungrouped, logits, steer);
    int64_t limited = 0;
    for (int64_t t = 0; t < kGroupTokens; ++t) {
      const float* row = logits.data() + t * kGroupExperts;
      std::vector<double> value(kGroupExperts), weight(kGroupExperts);
      double z = 0.0;
      for (int64_t e = 0; e < kGroupExperts; ++e) z += std::exp(double{row[e]});
      for (int64_t e = 0; e < kGroupExperts; ++e) {
        const double g = 1.0 / (1.0 + std::exp(-double{row[e]}));
        weight[e] = sigmoid ? g : pre ? std::exp(double{row[e]}) / z : std::exp(double{row[e]});
        value[e] = sigmoid ? g + bias[e] : pre ? weight[e] : double{row[e]};
      }
      const std::vector<int> picks = ReferenceGroupLimitedPicks(value, 4, 2, 4, 4 / 2);
      double sum = 0.0;
      for (int e : picks) sum += weight[e];
      for (int64_t j = 0; j < 4; ++j) {
        ASSERT_EQ(got.experts[t * 4 + j], picks[j]) << "token " << t << " slot " << j;
        // Sigmoid and picked-logit softmax weights are normalised over the picks.
        const double want = 2.5 * weight[picks[j]] / (pre ? 1.0 : sum);
        EXPECT_NEAR(got.probs[t * 4 + j], want, 1e-5 * want) << "token " << t;
      }
      limited += !std::equal(picks.begin(), picks.end(), free.experts.begin() + t * 4);
    }
    EXPECT_GT(limited, 0) << "no token's picks changed: the groups limited nothing";
  }
}

// Megatron scores a group by its topk / group_topk best values, transformers' DeepSeek-V3
// router by its best 2: with 8 experts in 2 groups of 4, 1 group per token and top-3
// (sigmoid scores steered by a bias), --moe-router-group-score-topk 0 picks as the
// reference summing 3, and 2 as the reference summing 2; some token's picks differ.
TEST(GroupLimitedRoutingTest, GroupsScoredByTheirBestTwoAsHuggingFace) {
  constexpr int64_t kScoredTokens = 32, kScoredExperts = 8, kTopk = 3;
  const std::vector<float> logits = RandomLogits(kScoredTokens, kScoredExperts, 43);
  std::vector<float> bias(kScoredExperts);
  for (int64_t e = 0; e < kScoredExperts; ++e) bias[e] = 0.04f * float(e % 4);
  RouterSpec spec;
  spec.experts = kScoredExperts;
  spec.topk = kTopk;
  spec.score = RouterScore::kSigmoid;
  spec.num_groups = 2;
  spec.group_topk = 1;
  std::vector<std::vector<int32_t>> picked;
  for (const int64_t score_topk : {0, 2}) {
    spec.group_score_topk = score_topk;
    const TopKRouting got = RouteTopK(spec, logits, bias);
    for (int64_t t = 0; t < kScoredTokens; ++t) {
      std::vector<double> value(kScoredExperts);
      for (int64_t e = 0; e < kScoredExperts; ++e) {
        value[e] = 1.0 / (1.0 + std::exp(-double{logits[t * kScoredExperts + e]})) + bias[e];
      }
      const std::vector<int> want =
          ReferenceGroupLimitedPicks(value, 2, 1, kTopk, score_topk == 0 ? kTopk : score_topk);
      for (int64_t j = 0; j < kTopk; ++j) {
        ASSERT_EQ(got.experts[t * kTopk + j], want[j])
            << "score_topk " << score_topk << " token " << t << " slot " << j;
      }
    }
    picked.push_back(got.experts);
  }
  EXPECT_NE(picked[0], picked[1]) << "no token's groups depend on how many experts score them";
}

// A worked example: groups {0,1} {2,3} {4,5}, one group per token, top-2. Expert 2 has
// the best single score, but group {0, 1} the best pair: the token gets experts 0 and 1.
TEST(GroupLimitedRoutingTest, HandWorkedExample) {
  RouterSpec spec;
  spec.experts = 6;
  spec.topk = 2;
  spec.pre_softmax = true;
  spec.num_groups = 3;
  spec.group_topk = 1;
  const std::vector<float> logits = {2.0f, 2.0f, 2.5f, 0.0f, 1.0f, 1.0f};
  EXPECT_EQ(RouteTopK(spec, logits, {}).experts, (std::vector<int32_t>{0, 1}));
  spec.num_groups = spec.group_topk = 0;
  EXPECT_EQ(RouteTopK(spec, logits, {}).experts, (std::vector<int32_t>{2, 0}));
}

// Megatron's capacity rule from its definition: slot (t, e) survives when fewer than
// `capacity` slots of expert e rank before it, ranking by weight (then position) for
// kProbs and by position for kPosition.
std::vector<uint8_t> ReferenceKeep(const TopKRouting& r, int64_t topk, int64_t capacity,
                                   TokenDropPolicy policy) {
  const size_t slots = r.experts.size();
  std::vector<uint8_t> keep(slots);
  for (size_t a = 0; a < slots; ++a) {
    int64_t before = 0;
    for (size_t b = 0; b < slots; ++b) {
      if (b == a || r.experts[b] != r.experts[a]) continue;
      const bool earlier = b / topk < a / topk;
      const bool ranks_before =
          policy == TokenDropPolicy::kPosition
              ? earlier
              : r.probs[b] > r.probs[a] || (r.probs[b] == r.probs[a] && earlier);
      before += ranks_before;
    }
    keep[a] = before < capacity;
  }
  return keep;
}

TEST(CapacityTest, KeepsWhatTheDropPolicyRanksFirst) {
  RouterSpec spec;
  spec.experts = 4;
  spec.topk = 2;
  const int64_t tokens = 16;
  const std::vector<float> logits = RandomLogits(tokens, spec.experts, 5);
  const TopKRouting routing = RouteTopK(spec, logits, {});
  for (const float factor : {0.5f, 1.0f, 1.3f}) {
    const int64_t capacity = ExpertCapacity(tokens, spec.topk, spec.experts, factor);
    EXPECT_EQ(capacity, static_cast<int64_t>(std::ceil(tokens * 2 / 4.0 * factor)));
    for (const TokenDropPolicy policy : {TokenDropPolicy::kProbs, TokenDropPolicy::kPosition}) {
      const std::vector<uint8_t> keep = CapacityKeep(spec, routing, capacity, policy);
      EXPECT_EQ(keep, ReferenceKeep(routing, spec.topk, capacity, policy))
          << "factor " << factor << " policy " << static_cast<int>(policy);
    }
  }
}

TEST(CapacityTest, HandWorkedExample) {
  // Four tokens, two experts, top-1, capacity ceil(4 / 2 * 1) = 2. Tokens 0, 1, 3 pick
  // expert 0 with weights sigmoid(0.2), sigmoid(2), sigmoid(1); token 2 picks expert 1.
  RouterSpec spec;
  spec.experts = 2;
  spec.topk = 1;
  spec.score = RouterScore::kSigmoid;
  const std::vector<float> logits = {0.2f, -1.0f, 2.0f, -1.0f, -1.0f, 0.5f, 1.0f, -1.0f};
  const TopKRouting routing = RouteTopK(spec, logits, {});
  ASSERT_EQ(routing.experts, (std::vector<int32_t>{0, 0, 1, 0}));
  const int64_t capacity = ExpertCapacity(4, 1, 2, 1.0f);
  ASSERT_EQ(capacity, 2);
  // probs: expert 0 keeps its two heaviest, tokens 1 and 3; position: the first two.
  EXPECT_EQ(CapacityKeep(spec, routing, capacity, TokenDropPolicy::kProbs),
            (std::vector<uint8_t>{0, 1, 1, 1}));
  EXPECT_EQ(CapacityKeep(spec, routing, capacity, TokenDropPolicy::kPosition),
            (std::vector<uint8_t>{1, 1, 1, 0}));
  // A capacity of every token drops nothing.
  EXPECT_EQ(CapacityKeep(spec, routing, 4, TokenDropPolicy::kProbs),
            (std::vector<uint8_t>{1, 1, 1, 1}));
}

}  // namespace
}  // namespace conveyor
