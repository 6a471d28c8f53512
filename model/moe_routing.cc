#include "model/moe_routing.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace conveyor {
namespace {

// Megatron's epsilon in the sigmoid weights' normalisation.
constexpr double kSigmoidNormEpsilon = 1e-20;

double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

double LogSumExp(const float* row, int64_t n) {
  const double m = *std::max_element(row, row + n);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(row[i] - m);
  return m + std::log(sum);
}

void Softmax(const float* row, int64_t n, double* out) {
  const double lse = LogSumExp(row, n);
  for (int64_t i = 0; i < n; ++i) out[i] = std::exp(row[i] - lse);
}

// The indices of the k largest of values[0, n), largest first; ties to the lower index.
std::vector<int32_t> TopK(const double* values, int64_t n, int64_t k) {
  std::vector<int32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
    return values[a] > values[b] || (values[a] == values[b] && a < b);
  });
  order.resize(k);
  return order;
}

// The experts a token routes to from its selection values [experts], largest first, ties
// to the lower index. Group-limited (Megatron's group_limited_topk; DeepSeek-V2 device-,
// DeepSeek-V3 node-limited routing): the experts form num_groups contiguous groups, each
// scored by the sum of its GroupScoreTopk() largest values; only the experts of the
// group_topk best groups compete for the top k.
std::vector<int32_t> PickExperts(const RouterSpec& spec, const double* values) {
  const int64_t e = spec.experts, k = spec.topk;
  if (spec.group_topk <= 0) return TopK(values, e, k);
  const int64_t groups = spec.num_groups, size = e / groups, best = spec.GroupScoreTopk();
  std::vector<double> group_score(groups, 0.0);
  for (int64_t g = 0; g < groups; ++g) {
    for (const int32_t i : TopK(values + g * size, size, best)) {
      group_score[g] += values[g * size + i];
    }
  }
  std::vector<double> competing(e, -std::numeric_limits<double>::infinity());
  for (const int32_t g : TopK(group_score.data(), groups, spec.group_topk)) {
    std::copy(values + g * size, values + (g + 1) * size, competing.begin() + g * size);
  }
  return TopK(competing.data(), e, k);
}

// Softmax backward: dl_j += scale * s_j (ds_j - sum_k s_k ds_k).
void SoftmaxBackward(const double* s, const double* ds, int64_t n, double scale, float* dl) {
  double dot = 0.0;
  for (int64_t i = 0; i < n; ++i) dot += s[i] * ds[i];
  for (int64_t i = 0; i < n; ++i) dl[i] += static_cast<float>(scale * s[i] * (ds[i] - dot));
}

// The scores the auxiliary loss reads for one token: the softmax over all experts, or the
// sigmoids normalised to sum 1 (Megatron's compute_routing_scores_for_aux_loss).
void AuxScores(RouterScore score, const float* row, int64_t n, double* s) {
  if (score == RouterScore::kSoftmax) {
    Softmax(row, n, s);
    return;
  }
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += s[i] = Sigmoid(row[i]);
  for (int64_t i = 0; i < n; ++i) s[i] /= sum + kSigmoidNormEpsilon;
}

// dl += scale * d(AuxScores)/dl^T ds. Normalised sigmoid, s_j = g_j / G with
// G = sum g + eps: dg_j = (ds_j - sum_k s_k ds_k) / G, dl_j = dg_j g_j (1 - g_j).
void AuxScoresBackward(RouterScore score, const float* row, int64_t n, const double* s,
                       const double* ds, double scale, float* dl) {
  if (score == RouterScore::kSoftmax) {
    SoftmaxBackward(s, ds, n, scale, dl);
    return;
  }
  double sum = 0.0, dot = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    sum += Sigmoid(row[i]);
    dot += s[i] * ds[i];
  }
  const double norm = sum + kSigmoidNormEpsilon;
  for (int64_t i = 0; i < n; ++i) {
    const double g = Sigmoid(row[i]);
    dl[i] += static_cast<float>(scale * (ds[i] - dot) / norm * g * (1.0 - g));
  }
}

int64_t Tokens(const RouterSpec& spec, absl::Span<const float> logits) {
  return static_cast<int64_t>(logits.size()) / spec.experts;
}

}  // namespace

TopKRouting RouteTopK(const RouterSpec& spec, absl::Span<const float> logits,
                      absl::Span<const float> expert_bias) {
  const int64_t tokens = Tokens(spec, logits), e = spec.experts, k = spec.topk;
  TopKRouting out;
  out.experts.resize(tokens * k);
  out.probs.resize(tokens * k);
  std::vector<double> s(e), ranked(e), p(k);
  for (int64_t t = 0; t < tokens; ++t) {
    const float* row = logits.data() + t * e;
    std::vector<int32_t> picks;
    if (spec.score == RouterScore::kSoftmax) {
      if (spec.pre_softmax) {
        Softmax(row, e, s.data());
        picks = PickExperts(spec, s.data());
        for (int64_t j = 0; j < k; ++j) p[j] = s[picks[j]];
      } else {
        std::copy(row, row + e, s.begin());
        picks = PickExperts(spec, s.data());
        std::vector<float> picked(k);
        for (int64_t j = 0; j < k; ++j) picked[j] = row[picks[j]];
        Softmax(picked.data(), k, p.data());
      }
    } else {
      for (int64_t i = 0; i < e; ++i) {
        s[i] = Sigmoid(row[i]);
        ranked[i] = s[i] + (expert_bias.empty() ? 0.0 : expert_bias[i]);
      }
      picks = PickExperts(spec, ranked.data());
      double sum = 0.0;
      for (int64_t j = 0; j < k; ++j) sum += p[j] = s[picks[j]];
      if (k > 1) {
        for (int64_t j = 0; j < k; ++j) p[j] /= sum + kSigmoidNormEpsilon;
      }
    }
    for (int64_t j = 0; j < k; ++j) {
      out.experts[t * k + j] = picks[j];
      const double scaled = spec.scaling_factor > 0 ? p[j] * spec.scaling_factor : p[j];
      out.probs[t * k + j] = static_cast<float>(scaled);
    }
  }
  return out;
}

void RouteTopKBackward(const RouterSpec& spec, absl::Span<const float> logits,
                       const TopKRouting& routing, absl::Span<const float> d_probs,
                       absl::Span<float> d_logits) {
  const int64_t tokens = Tokens(spec, logits), e = spec.experts, k = spec.topk;
  const double scale = spec.scaling_factor > 0 ? spec.scaling_factor : 1.0;
  std::vector<double> s(e), ds(e), p(k), dp(k);
  for (int64_t t = 0; t < tokens; ++t) {
    const float* row = logits.data() + t * e;
    float* dl = d_logits.data() + t * e;
    const int32_t* picks = routing.experts.data() + t * k;
    for (int64_t j = 0; j < k; ++j) dp[j] = scale * d_probs[t * k + j];
    if (spec.score == RouterScore::kSoftmax && spec.pre_softmax) {
      // p_j = s[picks_j], s = softmax(l).
      Softmax(row, e, s.data());
      std::fill(ds.begin(), ds.end(), 0.0);
      for (int64_t j = 0; j < k; ++j) ds[picks[j]] += dp[j];
      SoftmaxBackward(s.data(), ds.data(), e, 1.0, dl);
    } else if (spec.score == RouterScore::kSoftmax) {
      // p = softmax(l[picks]).
      std::vector<float> picked(k), d_picked(k, 0.0f);
      for (int64_t j = 0; j < k; ++j) picked[j] = row[picks[j]];
      Softmax(picked.data(), k, p.data());
      SoftmaxBackward(p.data(), dp.data(), k, 1.0, d_picked.data());
      for (int64_t j = 0; j < k; ++j) dl[picks[j]] += d_picked[j];
    } else {
      // g_j = sigmoid(l[picks_j]); p = g / (sum g + eps) for k > 1, else p = g.
      std::vector<double> g(k), dg(k);
      double sum = 0.0;
      for (int64_t j = 0; j < k; ++j) sum += g[j] = Sigmoid(row[picks[j]]);
      if (k > 1) {
        const double norm = sum + kSigmoidNormEpsilon;
        double dot = 0.0;
        for (int64_t j = 0; j < k; ++j) dot += g[j] / norm * dp[j];
        for (int64_t j = 0; j < k; ++j) dg[j] = (dp[j] - dot) / norm;
      } else {
        dg[0] = dp[0];
      }
      for (int64_t j = 0; j < k; ++j) {
        dl[picks[j]] += static_cast<float>(dg[j] * g[j] * (1.0 - g[j]));
      }
    }
  }
}

ExpertLoad MeasureExpertLoad(const RouterSpec& spec, absl::Span<const float> logits) {
  const int64_t tokens = Tokens(spec, logits), e = spec.experts;
  ExpertLoad load{std::vector<double>(e, 0.0), std::vector<double>(e, 0.0)};
  std::vector<double> s(e);
  for (int64_t t = 0; t < tokens; ++t) {
    AuxScores(spec.score, logits.data() + t * e, e, s.data());
    for (const int32_t pick : TopK(s.data(), e, spec.topk)) load.counts[pick] += 1.0;
    for (int64_t i = 0; i < e; ++i) load.scores[i] += s[i];
  }
  return load;
}

void AddExpertScoresBackward(const RouterSpec& spec, absl::Span<const float> logits,
                             absl::Span<const double> weight, double scale,
                             absl::Span<float> d_logits) {
  // d(sum_e w_e P_e)/ds[t, e] = w_e for every token.
  const int64_t tokens = Tokens(spec, logits), e = spec.experts;
  std::vector<double> s(e);
  for (int64_t t = 0; t < tokens; ++t) {
    const float* row = logits.data() + t * e;
    AuxScores(spec.score, row, e, s.data());
    AuxScoresBackward(spec.score, row, e, s.data(), weight.data(), scale, d_logits.data() + t * e);
  }
}

double LoadBalancingLoss(const RouterSpec& spec, absl::Span<const float> logits, int64_t groups,
                         float grad_scale, absl::Span<float> d_logits) {
  const int64_t e = spec.experts, group_tokens = Tokens(spec, logits) / groups;
  // The loss of a group is a bilinear form: factor * sum_e c_e * P_e.
  const double factor = static_cast<double>(e) /
                        (static_cast<double>(spec.topk) * group_tokens * group_tokens * groups);
  const int64_t group_size = group_tokens * e;
  std::vector<double> weight(e);
  double loss = 0.0;
  for (int64_t g = 0; g < groups; ++g) {
    const absl::Span<const float> rows = logits.subspan(g * group_size, group_size);
    const ExpertLoad load = MeasureExpertLoad(spec, rows);
    for (int64_t i = 0; i < e; ++i) {
      loss += factor * load.counts[i] * load.scores[i];
      weight[i] = factor * load.counts[i];
    }
    if (d_logits.empty()) continue;
    AddExpertScoresBackward(spec, rows, weight, grad_scale,
                            d_logits.subspan(g * group_size, group_size));
  }
  return loss;
}

double ZLoss(int64_t experts, absl::Span<const float> logits, float grad_scale,
             absl::Span<float> d_logits) {
  const int64_t tokens = static_cast<int64_t>(logits.size()) / experts;
  std::vector<double> s(experts);
  double sum = 0.0;
  for (int64_t t = 0; t < tokens; ++t) {
    const float* row = logits.data() + t * experts;
    const double lse = LogSumExp(row, experts);
    sum += lse * lse;
    if (d_logits.empty()) continue;
    // d(lse^2 / T)/dl = 2 lse softmax(l) / T.
    Softmax(row, experts, s.data());
    for (int64_t i = 0; i < experts; ++i) {
      d_logits[t * experts + i] += static_cast<float>(grad_scale * 2.0 * lse * s[i] / tokens);
    }
  }
  return sum / static_cast<double>(tokens);
}

int64_t ExpertCapacity(int64_t tokens, int64_t topk, int64_t experts, float capacity_factor) {
  return static_cast<int64_t>(std::ceil(static_cast<double>(tokens * topk) /
                                        static_cast<double>(experts) * capacity_factor));
}

std::vector<uint8_t> CapacityKeep(const RouterSpec& spec, const TopKRouting& routing,
                                  int64_t capacity, TokenDropPolicy policy) {
  const int64_t slots = static_cast<int64_t>(routing.experts.size());
  std::vector<uint8_t> keep(slots, 1);
  if (capacity >= slots / spec.topk) return keep;
  // Each expert's slots in token order; rank them by the policy and drop past capacity.
  std::vector<std::vector<int64_t>> by_expert(spec.experts);
  for (int64_t slot = 0; slot < slots; ++slot) by_expert[routing.experts[slot]].push_back(slot);
  for (std::vector<int64_t>& expert_slots : by_expert) {
    if (static_cast<int64_t>(expert_slots.size()) <= capacity) continue;
    if (policy == TokenDropPolicy::kProbs) {
      std::stable_sort(expert_slots.begin(), expert_slots.end(),
                       [&](int64_t a, int64_t b) { return routing.probs[a] > routing.probs[b]; });
    }
    for (size_t i = capacity; i < expert_slots.size(); ++i) keep[expert_slots[i]] = 0;
  }
  return keep;
}

}  // namespace conveyor
