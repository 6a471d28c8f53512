#include "trainer/config/model_from_config.h"

#include <algorithm>
#include <string>
#include <vector>

#include "model/moe_layer_pattern.h"
#include "trainer/config/attention_positions.h"

namespace conveyor {

ModelShape ModelShapeFromConfig(const ModelConfig& m, int64_t padded_vocab,
                                PositionEmbeddingType positions, Normalization normalization) {
  ModelShape s;
  s.num_layers = m.num_layers();
  s.hidden = m.hidden_size();
  s.ffn_hidden = m.ffn_hidden_size();
  s.heads = m.num_attention_heads();
  s.query_groups = m.num_query_groups();
  s.head_dim = m.kv_channels();
  s.seq = m.seq_length();
  s.padded_vocab = padded_vocab;
  s.max_positions = m.max_position_embeddings();
  s.rope = positions == PositionEmbeddingType::kRope || positions == PositionEmbeddingType::kYarn;
  s.no_positions = positions == PositionEmbeddingType::kNone;
  s.rotary_base = m.rotary_base();
  s.rotary_percent = m.rotary_percent();
  s.rope_scaling = RopeScalingFromConfig(m, positions);
  s.layer_windows = LayerWindowsFromConfig(m);
  s.rms_norm = normalization == Normalization::kRmsNorm;
  s.norm_epsilon = m.norm_epsilon();
  s.swiglu = m.swiglu();
  s.squared_relu = m.squared_relu();
  s.tied_embeddings = !m.untie_embeddings_and_output_weights();
  s.linear_bias = !m.disable_bias_linear();
  s.qkv_bias = m.add_qkv_bias();
  s.qk_layernorm = m.qk_layernorm();
  s.moe = MoeShapeFromConfig(m);
  s.mtp_layers = m.mtp_num_layers();
  s.mtp_loss_scaling = m.mtp_loss_scaling_factor();
  if (m.multi_latent_attention()) {
    s.UseMla({/*enabled=*/true, m.q_lora_rank(), m.kv_lora_rank(), m.qk_head_dim(),
              m.qk_pos_emb_head_dim(), m.v_head_dim()});
  }
  s.init_std = m.init_method_std();
  s.hidden_dropout = m.hidden_dropout();
  s.attention_dropout = m.attention_dropout();
  return s;
}

std::vector<MoeLoadBalancingType> LoadBalancingTypes(const ModelConfig& m) {
  std::vector<MoeLoadBalancingType> types;
  for (const std::string& type : m.moe_router_load_balancing_type()) {
    types.push_back(ChoiceOr(type, MoeLoadBalancingType::kNone));
  }
  if (types.empty()) types.push_back(MoeLoadBalancingType::kAuxLoss);
  return types;
}

float LoadBalancingCoeff(const ModelConfig& m, MoeLoadBalancingType type) {
  const std::vector<MoeLoadBalancingType> types = LoadBalancingTypes(m);
  const auto at = std::find(types.begin(), types.end(), type);
  const int index = static_cast<int>(at - types.begin());
  return at != types.end() && index < m.moe_aux_loss_coeff_size() ? m.moe_aux_loss_coeff(index)
                                                                  : 0.0f;
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
  moe.router.num_groups = m.moe_router_num_groups();
  moe.router.group_topk = m.moe_router_group_topk();
  moe.router.group_score_topk = m.moe_router_group_score_topk();
  moe.ffn_hidden = m.moe_ffn_hidden_size() > 0 ? m.moe_ffn_hidden_size() : m.ffn_hidden_size();
  moe.layers = ParseMoeLayerFreq(m.moe_layer_freq(), m.num_layers())
                   .value_or(std::vector<bool>(m.num_layers(), true));
  moe.aux_loss_coeff = LoadBalancingCoeff(m, MoeLoadBalancingType::kAuxLoss);
  moe.seq_aux_loss_coeff = LoadBalancingCoeff(m, MoeLoadBalancingType::kSeqAuxLoss);
  moe.global_aux_loss_coeff = LoadBalancingCoeff(m, MoeLoadBalancingType::kGlobalAuxLoss);
  moe.router_fp32 =
      ChoiceOr(m.moe_router_dtype(), MoeRouterDtype::kCompute) == MoeRouterDtype::kFp32;
  moe.z_loss_coeff = m.moe_z_loss_coeff();
  moe.shared_expert_ffn = m.moe_shared_expert_intermediate_size();
  moe.shared_expert_gate = m.moe_shared_expert_gate();
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

RecomputePolicy RecomputePolicyFromConfig(const RecomputeConfig& r,
                                          RecomputeGranularity granularity,
                                          RecomputeMethod method) {
  RecomputePolicy policy;
  if (granularity == RecomputeGranularity::kFull) {
    policy.full = method == RecomputeMethod::kBlock ? RecomputePolicy::Full::kBlock
                                                    : RecomputePolicy::Full::kUniform;
    policy.num_layers = r.recompute_num_layers();
  } else if (granularity == RecomputeGranularity::kSelective) {
    for (const std::string& module : r.recompute_modules()) {
      if (module == "core_attn") policy.selective.core_attn = true;
      if (module == "mlp") policy.selective.mlp = true;
      if (module == "layernorm") policy.selective.layernorm = true;
    }
  }
  return policy;
}

PipelineSplit PipelineSplitFromConfig(const Config& config) {
  const ParallelConfig& p = config.parallel();
  PipelineSplit split;
  split.num_layers = config.model().num_layers();
  split.pipeline_ranks = p.pipeline_model_parallel_size();
  split.virtual_stages = std::max(1, p.num_virtual_stages_per_pipeline_rank());
  split.first_stage_layers = p.decoder_first_pipeline_num_layers();
  split.last_stage_layers = p.decoder_last_pipeline_num_layers();
  split.embedding_counts = p.account_for_embedding_in_pipeline_split();
  split.loss_counts = p.account_for_loss_in_pipeline_split();
  return split;
}

}  // namespace conveyor
