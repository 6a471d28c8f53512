// The mixture-of-experts router's math, as Megatron computes it
// (megatron/core/transformer/moe/moe_utils.py): top-k selection with a score function,
// the load-balancing and z losses, and expert capacity. It works on host fp32 arrays of
// router logits [tokens, experts] (row-major): the router's output is small (tokens x
// experts), and the token dispatch needs the routing decisions on the host anyway to size
// its buffers. Every backend routes through these functions (see model/moe_router.h).
//
// Routing is deterministic: equal scores are ranked by the lower expert index, and under
// capacity equal tokens by the lower token index.
#ifndef CONVEYOR_MODEL_MOE_ROUTING_H_
#define CONVEYOR_MODEL_MOE_ROUTING_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace conveyor {

enum class RouterScore { kSoftmax, kSigmoid };

struct RouterSpec {
  int64_t experts = 0;
  int64_t topk = 1;
  RouterScore score = RouterScore::kSoftmax;
  // softmax only: softmax over all experts, then top-k (else top-k of the logits, then a
  // softmax over the k picked).
  bool pre_softmax = false;
  float scaling_factor = 0.0f;  // 0: none; else the probabilities are multiplied by it
  // Group-limited routing (--moe-router-num-groups, --moe-router-group-topk): the top k
  // come from the group_topk best of num_groups contiguous expert groups, a group scored
  // by the sum of its group_score_topk best selection values (0: topk / group_topk, as
  // Megatron's group_limited_topk; Hugging Face's DeepseekV3TopkRouter takes 2). 0
  // groups: every expert competes.
  int64_t num_groups = 0;
  int64_t group_topk = 0;
  int64_t group_score_topk = 0;

  // The experts whose selection values score a group.
  int64_t GroupScoreTopk() const {
    return group_score_topk > 0 ? group_score_topk : topk / group_topk;
  }
};

// Per token (row), its topk experts in descending routing score and their weights.
struct TopKRouting {
  std::vector<int32_t> experts;  // [tokens, topk]
  std::vector<float> probs;      // [tokens, topk]
};

// Megatron's topk_routing_with_score_function. With p = the weights of token t's picks:
//   softmax, pre_softmax: s = softmax(l); picks = topk(s); p = s[picks]
//   softmax:              picks = topk(l); p = softmax(l[picks])
//   sigmoid:              s = sigmoid(l); picks = topk(s + bias); p = s[picks] / (sum + 1e-20)
//                         (the division only for topk > 1)
// then p *= scaling_factor when set. `expert_bias` ([experts] or empty) steers the
// sigmoid's selection only (auxiliary-loss-free balancing), never the weights. With groups,
// each topk above picks among the experts of the token's group_topk best groups, scored on
// the values it ranks (s, l or s + bias).
TopKRouting RouteTopK(const RouterSpec& spec, absl::Span<const float> logits,
                      absl::Span<const float> expert_bias);

// d_logits += d(probs)/d(logits)^T d_probs for RouteTopK's result (the picks are
// piecewise constant, so only the weights carry gradient).
void RouteTopKBackward(const RouterSpec& spec, absl::Span<const float> logits,
                       const TopKRouting& routing, absl::Span<const float> d_probs,
                       absl::Span<float> d_logits);

// The two statistics per expert e of a block of tokens that Megatron's load-balancing
// losses read (switch_load_balancing_loss_func): c_e, how many of the tokens have e among
// the top k of their scores for the auxiliary loss (the softmax over all experts, or the
// sigmoids normalised per token; no bias, before any capacity drop), and P_e, the sum of
// those scores over the tokens.
struct ExpertLoad {
  std::vector<double> counts;  // c [experts]
  std::vector<double> scores;  // P [experts]
};
ExpertLoad MeasureExpertLoad(const RouterSpec& spec, absl::Span<const float> logits);

// d_logits += scale * d(sum_e weight_e * P_e)/d(logits) over the block's tokens: the
// gradient of a loss bilinear in c and P, whose counts carry no gradient.
void AddExpertScoresBackward(const RouterSpec& spec, absl::Span<const float> logits,
                             absl::Span<const double> weight, double scale,
                             absl::Span<float> d_logits);

// The load-balancing loss (Switch Transformer; Megatron's switch_load_balancing_loss_func)
// over `groups` equal, contiguous groups of tokens, averaged over the groups:
//   per group of T tokens: L = E / (k T^2) * sum_e c_e * P_e
// with MeasureExpertLoad's c and P of the group. groups = 1 is
// --moe-router-load-balancing-type aux_loss; one group per sequence is seq_aux_loss
// (DeepSeek-V3's sequence-wise balance loss, eqs. 17-20, is the same L: its
// f_i = E c_i / (k T) and P_i = (our P_i) / T). Returns L (without coefficient) and adds
// `grad_scale` * dL/dlogits into d_logits (when not empty).
double LoadBalancingLoss(const RouterSpec& spec, absl::Span<const float> logits, int64_t groups,
                         float grad_scale, absl::Span<float> d_logits);

// The z-loss (ST-MoE): mean over tokens of logsumexp(l[t, :])^2. Returns it and adds
// `grad_scale` * its gradient into d_logits (when not empty).
double ZLoss(int64_t experts, absl::Span<const float> logits, float grad_scale,
             absl::Span<float> d_logits);

enum class TokenDropPolicy { kProbs, kPosition };

// Megatron's get_capacity for top-k routing: ceil(tokens * topk / experts * factor).
int64_t ExpertCapacity(int64_t tokens, int64_t topk, int64_t experts, float capacity_factor);

// Which routing slots ([tokens, topk]) an expert of `capacity` keeps (1) or drops (0):
// each expert keeps its `capacity` tokens of highest weight (kProbs) or earliest position
// (kPosition). A capacity of at least the token count drops nothing.
std::vector<uint8_t> CapacityKeep(const RouterSpec& spec, const TopKRouting& routing,
                                  int64_t capacity, TokenDropPolicy policy);

}  // namespace conveyor

#endif  // CONVEYOR_MODEL_MOE_ROUTING_H_
