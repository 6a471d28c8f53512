#include "model/moe_shape.h"

#include <algorithm>

#include "model/moe_layer_pattern.h"

namespace conveyor {

int64_t PaddedExpertRows(const MoeShape& moe, int64_t tokens) {
  if (!moe.drops_tokens() || !moe.pad_to_capacity) return 0;
  return std::min(tokens,
                  ExpertCapacity(tokens, moe.router.topk, moe.experts(), moe.capacity_factor));
}

MoeShape MoeShapeFromConfig(const ModelConfig& m) {
  MoeShape moe;
  if (m.num_experts() <= 0) return moe;
  moe.router.experts = m.num_experts();
  moe.router.topk = m.moe_router_topk();
  moe.router.score = ChoiceOr(m.moe_router_score_function(), MoeRouterScoreFunction::kSoftmax) ==
                             MoeRouterScoreFunction::kSigmoid
                         ? RouterScore::kSigmoid
                         : RouterScore::kSoftmax;
  moe.router.pre_softmax = m.moe_router_pre_softmax();
  moe.router.scaling_factor = m.moe_router_topk_scaling_factor();
  moe.ffn_hidden = m.moe_ffn_hidden_size() > 0 ? m.moe_ffn_hidden_size() : m.ffn_hidden_size();
  moe.layers = ParseMoeLayerFreq(m.moe_layer_freq(), m.num_layers())
                   .value_or(std::vector<bool>(m.num_layers(), true));
  moe.balancing = ChoiceOr(m.moe_router_load_balancing_type(), MoeLoadBalancingType::kAuxLoss);
  moe.aux_loss_coeff = m.moe_aux_loss_coeff();
  moe.z_loss_coeff = m.moe_z_loss_coeff();
  moe.shared_expert_ffn = m.moe_shared_expert_intermediate_size();
  moe.capacity_factor = m.moe_expert_capacity_factor();
  moe.drop_policy = ChoiceOr(m.moe_token_drop_policy(), MoeTokenDropPolicy::kProbs) ==
                            MoeTokenDropPolicy::kPosition
                        ? TokenDropPolicy::kPosition
                        : TokenDropPolicy::kProbs;
  moe.pad_to_capacity = m.moe_pad_expert_input_to_capacity();
  moe.expert_bias = m.moe_router_enable_expert_bias();
  moe.bias_update_rate = m.moe_router_bias_update_rate();
  return moe;
}

int ExpertTensorParallelSize(const ParallelConfig& p) {
  return p.expert_tensor_parallel_size() > 0 ? p.expert_tensor_parallel_size()
                                             : p.tensor_model_parallel_size();
}

}  // namespace conveyor
