// Auxiliary-loss-free load balancing (DeepSeek-V3; Wang et al., arXiv:2408.15664), as
// Megatron's --moe-router-enable-expert-bias does it: each MoE layer keeps an fp32 bias
// per expert, added to the routing scores only to choose each token's top-k (the routing
// weights use the unbiased scores; model/moe_routing.h's RouteTopK). It is state,
// not a parameter: no gradient, no optimizer state, no weight decay. Over a step's
// training micro-batches the layer counts the tokens each expert received; after the
// step, with the counts summed over the ranks that route different tokens,
//   bias[e] += rate * sign(mean_e'(tokens[e']) - tokens[e])
// (Megatron's get_updated_expert_bias): under-loaded experts become likelier picks.
#ifndef CONVEYOR_MODEL_EXPERT_BIAS_H_
#define CONVEYOR_MODEL_EXPERT_BIAS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/types/span.h"

namespace conveyor {

// Megatron's update of one layer's bias from its step's token counts (all ranks' sum):
// bias[e] += rate * sign(mean(tokens) - tokens[e]), in fp32; sign(0) = 0, so an expert
// at exactly the mean keeps its bias.
void UpdateExpertBias(absl::Span<const float> tokens, float rate, absl::Span<float> bias);

class ExpertBias {
 public:
  // `name` is the checkpoint's ("layers.N.mlp.router.expert_bias"); the bias starts at 0.
  ExpertBias(std::string name, int64_t experts);

  const std::string& name() const { return name_; }
  absl::Span<const float> values() const { return values_; }
  // For checkpoints: saving reads, loading writes the values.
  float* mutable_values() { return values_.data(); }

  // Adds one training micro-batch's routing to the step's counts: each expert's kept
  // slots (`experts_of_slot` [tokens * topk], `keep` the same size or empty for all
  // kept). With --moe-pad-expert-input-to-capacity every expert counts `padded_rows`
  // instead (Megatron counts its routing map, which padding fills to the capacity).
  void CountMicroBatch(absl::Span<const int32_t> experts_of_slot, absl::Span<const uint8_t> keep,
                       int64_t padded_rows);
  // This rank's counts since the last update (fp32, as Megatron's local_tokens_per_expert).
  absl::Span<const float> step_tokens() const { return step_tokens_; }

  // After a step: UpdateExpertBias with `tokens` (the step's counts summed over the
  // routing ranks), then the counts start anew.
  void Update(absl::Span<const float> tokens, float rate);
  // After a skipped step: the counts start anew, the bias stays.
  void ClearCounts();

 private:
  std::string name_;
  std::vector<float> values_;
  std::vector<float> step_tokens_;
};

}  // namespace conveyor

#endif  // CONVEYOR_MODEL_EXPERT_BIAS_H_
