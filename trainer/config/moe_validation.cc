#include "trainer/config/moe_validation.h"

#include <algorithm>
#include <cmath>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/moe_layer_pattern.h"
#include "proto/config_choices.h"
#include "trainer/config/model_from_config.h"

namespace conveyor {
namespace {

// --moe-router-num-groups and --moe-router-group-topk (Megatron's group_limited_topk): the
// groups split the experts evenly, and the chosen groups hold at least one of each
// token's picks per group and enough experts for all of them.
std::vector<std::string> GroupLimitedRoutingProblems(const ModelConfig& m) {
  const int64_t groups = m.moe_router_num_groups(), chosen = m.moe_router_group_topk();
  const int64_t scoring = m.moe_router_group_score_topk();
  if (groups == 0 && chosen == 0) {
    if (scoring == 0) return {};
    return {absl::StrCat("--moe-router-group-score-topk ", scoring,
                         " scores expert groups, but there are none: set "
                         "--moe-router-num-groups and --moe-router-group-topk, or drop it")};
  }
  if (groups <= 0 || chosen <= 0) {
    return {absl::StrCat("--moe-router-num-groups ", groups, " and --moe-router-group-topk ",
                         chosen, " go together: set both positive, or neither")};
  }
  std::vector<std::string> out;
  if (m.num_experts() % groups != 0) {
    out.push_back(absl::StrCat("--moe-router-num-groups ", groups,
                               " must divide --num-experts (", m.num_experts(), ")"));
  }
  if (chosen > groups) {
    out.push_back(absl::StrCat("--moe-router-group-topk ", chosen,
                               " must be at most --moe-router-num-groups (", groups, ")"));
  }
  if (chosen > m.moe_router_topk() ||
      (m.num_experts() % groups == 0 && m.moe_router_topk() > chosen * (m.num_experts() / groups))) {
    out.push_back(absl::StrCat("--moe-router-topk ", m.moe_router_topk(),
                               " must be at least --moe-router-group-topk (", chosen,
                               ") and fit in that many groups of ", m.num_experts() / groups,
                               " experts"));
  }
  if (scoring < 0 || (m.num_experts() % groups == 0 && scoring > m.num_experts() / groups)) {
    out.push_back(absl::StrCat("--moe-router-group-score-topk ", scoring,
                               " must be between 0 (topk / group-topk) and a group's ",
                               m.num_experts() / groups, " experts"));
  }
  return out;
}

void NonNegativeReal(const char* flag, double v, std::vector<std::string>* out) {
  if (!(v >= 0) || !std::isfinite(v)) {
    out->push_back(absl::StrCat(flag, " ", v, " must not be negative: set ", flag, " >= 0"));
  }
}

// --moe-router-enable-expert-bias's settings. Megatron's TransformerConfig refuses a
// softmax score too: the bias is added to scores in (0, 1).
void ExpertBiasProblems(const ModelConfig& m, std::vector<std::string>* out) {
  if (ChoiceOr(m.moe_router_score_function(), MoeRouterScoreFunction::kSoftmax) !=
      MoeRouterScoreFunction::kSigmoid) {
    out->push_back(
        "--moe-router-enable-expert-bias: the expert bias (auxiliary-loss-free balancing) "
        "works with sigmoid scores only, as in Megatron: add --moe-router-score-function "
        "sigmoid, or drop --moe-router-enable-expert-bias");
  }
  NonNegativeReal("--moe-router-bias-update-rate", m.moe_router_bias_update_rate(), out);
}

// --moe-router-load-balancing-type and --moe-aux-loss-coeff as Megatron pairs them (one
// coefficient per listed type), and --moe-router-dtype.
void RouterLossProblems(const Config& config, std::vector<std::string>* out) {
  const ModelConfig& m = config.model();
  const int types = m.moe_router_load_balancing_type_size();
  const int coeffs = m.moe_aux_loss_coeff_size();
  if (coeffs > std::max(types, 1) || (types > 1 && coeffs != types)) {
    out->push_back(absl::StrCat(
        "--moe-aux-loss-coeff has ", coeffs, " values for ", std::max(types, 1),
        " --moe-router-load-balancing-type types (",
        types > 0 ? absl::StrJoin(m.moe_router_load_balancing_type(), " ") : "aux_loss",
        "): give one coefficient per type, in the same order, as Megatron requires"));
  }
  for (const MoeLoadBalancingType type : LoadBalancingTypes(m)) {
    if (type == MoeLoadBalancingType::kSinkhorn) {
      out->push_back(
          "--moe-router-load-balancing-type sinkhorn: S-BASE's Sinkhorn balancing is not "
          "implemented: use aux_loss, seq_aux_loss, global_aux_loss or none");
    } else if (type == MoeLoadBalancingType::kQuantileBalancing) {
      out->push_back(
          "--moe-router-load-balancing-type quantile_balancing: quantile balancing (a "
          "per-expert bias by dual coordinate descent) is not implemented: use aux_loss, "
          "seq_aux_loss, global_aux_loss, none, or --moe-router-enable-expert-bias");
    }
  }
  for (int i = 0; i < types; ++i) {
    for (int j = 0; j < i; ++j) {
      if (m.moe_router_load_balancing_type(i) == m.moe_router_load_balancing_type(j)) {
        out->push_back(absl::StrCat("--moe-router-load-balancing-type lists ",
                                    m.moe_router_load_balancing_type(i),
                                    " twice: list each type once"));
      }
    }
  }
  for (const float coeff : m.moe_aux_loss_coeff()) {
    NonNegativeReal("--moe-aux-loss-coeff", coeff, out);
  }
  const bool global = LoadBalancingCoeff(m, MoeLoadBalancingType::kGlobalAuxLoss) > 0;
  if (global && config.parallel().overlap_param_gather()) {
    out->push_back(
        "--moe-router-load-balancing-type global_aux_loss sums each micro-batch's expert "
        "counts over the data-parallel group during forward, while --overlap-param-gather's "
        "all-gathers hold that group: drop --overlap-param-gather");
  }
  if (ChoiceOr(m.moe_router_dtype(), MoeRouterDtype::kCompute) == MoeRouterDtype::kFp64) {
    out->push_back(
        "--moe-router-dtype fp64: a float64 router GEMM is not implemented (no backend has a "
        "float64 GEMM): use --moe-router-dtype fp32, which keeps the router's GEMM, gradients "
        "and scores in fp32 under --bf16");
  }
  // No op of its own, but until it has trained on a GPU, refused there as context
  // parallelism is.
  if (ChoiceOr(m.moe_router_dtype(), MoeRouterDtype::kCompute) == MoeRouterDtype::kFp32 &&
      ParseChoice<DeviceKind>(config.parallel().device()) == DeviceKind::kCuda) {
    out->push_back(
        "--moe-router-dtype fp32 with --device cuda: the fp32 router uses the CUDA backend's "
        "existing ops but has never run on a GPU; run it with --device cpu, or drop "
        "--moe-router-dtype (the router then runs in the compute dtype)");
  }
}

// The experts under tensor parallelism: split over --expert-tensor-parallel-size ranks
// (Megatron's default: TP), with sequence parallelism.
void TensorParallelProblems(const Config& config, std::vector<std::string>* out) {
  const ModelConfig& m = config.model();
  const int tp = config.parallel().tensor_model_parallel_size();
  if (tp <= 1) return;
  if (!config.parallel().sequence_parallel()) {
    out->push_back(
        "--num-experts with --tensor-model-parallel-size > 1 needs --sequence-parallel "
        "(Megatron refuses MoE training under TP without it too): add --sequence-parallel");
  }
  const int etp = config.parallel().expert_tensor_parallel_size();
  const int64_t ffn = m.moe_ffn_hidden_size() > 0 ? m.moe_ffn_hidden_size() : m.ffn_hidden_size();
  if (ffn > 0 && etp == 0 && ffn % tp != 0) {
    out->push_back(absl::StrCat("--moe-ffn-hidden-size ", ffn,
                                " must be divisible by --tensor-model-parallel-size ", tp,
                                ": the experts are split over the TP ranks (or set "
                                "--expert-tensor-parallel-size to a divisor of both)"));
  } else if (ffn > 0 && etp > 0 && ffn % etp != 0) {
    out->push_back(absl::StrCat("--moe-ffn-hidden-size ", ffn,
                                " must be divisible by --expert-tensor-parallel-size ", etp,
                                ": each expert is split over that many ranks"));
  }
  if (m.moe_shared_expert_intermediate_size() % tp != 0) {
    out->push_back(absl::StrCat("--moe-shared-expert-intermediate-size ",
                                m.moe_shared_expert_intermediate_size(),
                                " must be divisible by --tensor-model-parallel-size ", tp));
  }
}

}  // namespace

std::vector<std::string> MoeProblems(const Config& config) {
  const ModelConfig& m = config.model();
  std::vector<std::string> out;
  if (m.num_experts() < 0) {
    out.push_back(absl::StrCat("--num-experts ", m.num_experts(),
                               " must not be negative: set it to 0 (dense) or more"));
  }
  if (m.num_experts() <= 0) return out;
  if (m.moe_router_topk() < 1 || m.moe_router_topk() > m.num_experts()) {
    out.push_back(absl::StrCat("--moe-router-topk ", m.moe_router_topk(),
                               " must be between 1 and --num-experts (", m.num_experts(), ")"));
  }
  if (m.moe_ffn_hidden_size() < 0) {
    out.push_back(absl::StrCat("--moe-ffn-hidden-size ", m.moe_ffn_hidden_size(),
                               " must not be negative: 0 means --ffn-hidden-size"));
  }
  if (m.moe_shared_expert_intermediate_size() < 0) {
    out.push_back(absl::StrCat("--moe-shared-expert-intermediate-size ",
                               m.moe_shared_expert_intermediate_size(),
                               " must not be negative: 0 means no shared expert"));
  }
  for (std::string& problem : GroupLimitedRoutingProblems(m)) out.push_back(std::move(problem));
  if (m.moe_shared_expert_gate() && m.moe_shared_expert_intermediate_size() <= 0) {
    out.push_back(
        "--moe-shared-expert-gate gates the shared expert: set "
        "--moe-shared-expert-intermediate-size too");
  }
  if (m.num_layers() > 0) {
    const absl::StatusOr<std::vector<bool>> pattern =
        ParseMoeLayerFreq(m.moe_layer_freq(), m.num_layers());
    if (!pattern.ok()) out.push_back(std::string(pattern.status().message()));
  }
  NonNegativeReal("--moe-router-topk-scaling-factor", m.moe_router_topk_scaling_factor(), &out);
  NonNegativeReal("--moe-z-loss-coeff", m.moe_z_loss_coeff(), &out);
  NonNegativeReal("--moe-expert-capacity-factor", m.moe_expert_capacity_factor(), &out);
  if (m.moe_pad_expert_input_to_capacity() && !(m.moe_expert_capacity_factor() > 0)) {
    out.push_back(
        "--moe-pad-expert-input-to-capacity pads to the expert capacity: set "
        "--moe-expert-capacity-factor too");
  }
  if (!m.disable_bias_linear()) {
    out.push_back(
        "--num-experts: experts without biases only (Megatron's all-to-all token dispatcher "
        "has none either): add --disable-bias-linear");
  }
  if (m.moe_router_enable_expert_bias()) ExpertBiasProblems(m, &out);
  RouterLossProblems(config, &out);
  TensorParallelProblems(config, &out);
  return out;
}

std::vector<std::string> ExpertParallelProblems(const Config& config, int world_size) {
  const ParallelConfig& p = config.parallel();
  const int ep = p.expert_model_parallel_size();
  const int tp = p.tensor_model_parallel_size();
  const int etp = p.expert_tensor_parallel_size();
  const int experts = config.model().num_experts();
  std::vector<std::string> out;
  if (etp < 0 || (etp > 0 && tp > 0 && tp % etp != 0)) {
    out.push_back(absl::StrCat("--expert-tensor-parallel-size ", etp,
                               " must divide --tensor-model-parallel-size ", tp,
                               " (an expert's shards stay within a tensor-parallel group): "
                               "choose a divisor of ",
                               tp, ", or 0 for TP itself"));
  } else if (etp > 0 && etp != tp && experts <= 0) {
    out.push_back(absl::StrCat("--expert-tensor-parallel-size ", etp,
                               " splits a mixture of experts' experts: add --num-experts, or "
                               "drop the flag"));
  }
  if (ep < 1) {
    out.push_back(absl::StrCat("--expert-model-parallel-size ", ep,
                               " must be at least 1 (1: every rank holds every expert)"));
  }
  if (ep <= 1) return out;
  if (experts <= 0) {
    out.push_back(absl::StrCat("--expert-model-parallel-size ", ep,
                               " splits a mixture of experts' experts over ranks: add "
                               "--num-experts (a multiple of ",
                               ep, "), or drop the flag"));
  } else if (experts % ep != 0) {
    out.push_back(absl::StrCat("--num-experts ", experts,
                               " must be divisible by --expert-model-parallel-size ", ep,
                               ": every expert-parallel rank holds the same number of experts"));
  }
  // The ranks an expert's copies span: a stage's ranks over expert TP (sizes that do not
  // divide the world are reported elsewhere).
  const int etp_pp = (etp > 0 ? etp : tp) * p.pipeline_model_parallel_size();
  if (etp_pp > 0 && world_size % etp_pp == 0 && (world_size / etp_pp) % ep != 0) {
    out.push_back(absl::StrCat(
        "--expert-model-parallel-size ", ep, " must divide the ranks an expert's copies span (",
        world_size / etp_pp, " = world size ", world_size,
        " / (expert TP x PP)): the experts are spread over the data-parallel (and, with "
        "--expert-tensor-parallel-size below TP, tensor-parallel) ranks; choose a divisor of ",
        world_size / etp_pp));
  }
  return out;
}

}  // namespace conveyor
