#include "trainer/hf/moe_config_json.h"

#include <algorithm>
#include <cstdint>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/moe_layer_pattern.h"
#include "trainer/config/model_from_config.h"
#include "trainer/hf/hf_config_fields.h"
#include "trainer/hf/json_text.h"
#include "trainer/hf/moe_mapping.h"

namespace conveyor {
namespace {

// Which layers of a Qwen MoE model are MoE (Qwen2MoeDecoderLayer's rule): layer i is,
// unless it is in mlp_only_layers, when (i + 1) % decoder_sparse_step == 0. As
// --moe-layer-freq: "1" when every layer is, else the list of 0/1 per layer (Megatron's
// integer N means layers 0, N, 2N, ..., not HF's (i + 1) % N == 0).
std::string QwenMoeLayerFreq(const Json& hf, const HfArchitecture& arch,
                             ModelFlagsFromFile* flags) {
  const int64_t layers = AsInt64(MemberOrNull(hf, "num_hidden_layers"));
  const int64_t step = AsInt64(HfFieldOrDefault(hf, arch, "decoder_sparse_step"));
  if (step < 1) {
    flags->Unsupported(absl::StrCat("decoder_sparse_step = ", step, " is not a step: at least 1"));
    return "1";
  }
  std::set<int64_t> dense;
  const Json listed = HfFieldOrDefault(hf, arch, "mlp_only_layers");
  for (const Json& layer : listed) {
    if (!layer.is_number() || AsDouble(layer) != double(AsInt64(layer))) {
      flags->Unsupported(absl::StrCat("mlp_only_layers holds ", JsonValueText(layer),
                                      ": it lists layer indices"));
      continue;
    }
    dense.insert(AsInt64(layer));
  }
  std::vector<int> moe;
  for (int64_t i = 0; i < layers; ++i) moe.push_back(dense.count(i) == 0 && (i + 1) % step == 0);
  if (std::find(moe.begin(), moe.end(), 0) == moe.end()) return "1";
  return absl::StrCat("[", absl::StrJoin(moe, ","), "]");
}

// DeepseekV3MoE's routing (modeling_deepseek_v3.py): sigmoid scores, the expert bias
// e_score_correction_bias added only to choose, top-k within the topk_group best of n_group
// groups (a group scored by its two best biased scores: --moe-router-group-score-topk 2),
// the chosen scores renormalised (norm_topk_prob) and scaled by routed_scaling_factor;
// layers from first_k_dense_replace on are MoE, with n_shared_experts experts of
// moe_intermediate_size fused into one shared expert. Conveyor's sigmoid router
// renormalises exactly when top-k > 1 (as Megatron's): other combinations are unsupported.
void ApplyDeepseekMoeConfigJson(const Json& hf, const HfArchitecture& arch,
                                ModelFlagsFromFile* flags) {
  auto value = [&](const char* key) { return HfFieldOrDefault(hf, arch, key); };
  const std::string architecture = absl::StrCat("architectures = [\"", arch.class_name, "\"]");
  const int64_t experts = AsInt64(value("n_routed_experts"));
  const int64_t topk = AsInt64(value("num_experts_per_tok"));
  const int64_t width = AsInt64(value("moe_intermediate_size"));
  flags->Int("num_experts", "n_routed_experts", experts);
  flags->Int("moe_router_topk", "num_experts_per_tok", topk);
  flags->Int("moe_ffn_hidden_size", "moe_intermediate_size", width);
  flags->String("moe_router_score_function", architecture, "sigmoid");
  flags->Bool("moe_router_enable_expert_bias", architecture, true,
              "an expert bias (e_score_correction_bias)");
  flags->Bool("moe_router_pre_softmax", architecture, false, "no softmax");
  flags->Float("moe_router_topk_scaling_factor", "routed_scaling_factor",
               AsDouble(value("routed_scaling_factor")));
  if (AsBool(value("norm_topk_prob")) != (topk > 1)) {
    flags->Unsupported(absl::StrCat("norm_topk_prob = ", JsonValueText(value("norm_topk_prob")),
                                    " with num_experts_per_tok = ", topk,
                                    ": Conveyor's sigmoid router renormalises its weights "
                                    "exactly when it picks more than one expert"));
  }
  const int64_t groups = AsInt64(value("n_group")), best = AsInt64(value("topk_group"));
  const bool limited = groups > 1 && best < groups;
  if (groups > 0 && experts % groups != 0) {
    flags->Unsupported(
        absl::StrCat("n_group = ", groups, " does not divide n_routed_experts = ", experts));
  }
  flags->Int("moe_router_num_groups", "n_group", limited ? groups : 0);
  flags->Int("moe_router_group_topk", "topk_group", limited ? best : 0);
  // DeepseekV3TopkRouter scores a group by its best 2 (Megatron by topk / topk_group).
  flags->Int("moe_router_group_score_topk", architecture, limited ? kDeepseekGroupScoreTopk : 0);
  const int64_t layers = AsInt64(MemberOrNull(hf, "num_hidden_layers"));
  const int64_t dense = AsInt64(value("first_k_dense_replace"));
  if (dense < 0 || dense > layers) {
    flags->Unsupported(absl::StrCat("first_k_dense_replace = ", dense, " is not a layer count of ",
                                    layers, " layers"));
  }
  std::vector<int> moe;
  for (int64_t i = 0; i < layers; ++i) moe.push_back(i >= dense);
  flags->String("moe_layer_freq", "first_k_dense_replace",
                dense <= 0 ? "1" : absl::StrCat("[", absl::StrJoin(moe, ","), "]"));
  const int64_t shared = AsInt64(value("n_shared_experts"));
  if (shared < 0) flags->Unsupported(absl::StrCat("n_shared_experts = ", shared, " is negative"));
  flags->Int("moe_shared_expert_intermediate_size", "n_shared_experts and moe_intermediate_size",
             shared * width);
  flags->Bool("moe_shared_expert_gate", architecture, false, "shared experts without a gate");
}

}  // namespace

void ApplyMoeConfigJson(const Json& hf, const HfArchitecture& arch,
                        ModelFlagsFromFile* flags) {
  if (!arch.moe) return;
  if (arch.mla) {
    ApplyDeepseekMoeConfigJson(hf, arch, flags);
    return;
  }
  auto value = [&](const char* key) { return HfFieldOrDefault(hf, arch, key); };
  const std::string architecture = absl::StrCat("architectures = [\"", arch.class_name, "\"]");
  const bool mixtral = std::string(arch.model_type) == "mixtral";
  const bool qwen2 = std::string(arch.model_type) == "qwen2_moe";
  const char* experts = mixtral ? "num_local_experts" : "num_experts";
  flags->Int("num_experts", experts, AsInt64(value(experts)));
  flags->Int("moe_router_topk", "num_experts_per_tok", AsInt64(value("num_experts_per_tok")));
  flags->String("moe_router_score_function", architecture, "softmax");
  flags->Float("moe_router_topk_scaling_factor", architecture, 0.0);
  flags->Bool("moe_router_enable_expert_bias", architecture, false, "no expert bias");
  if (mixtral) {
    flags->Int("moe_ffn_hidden_size", "intermediate_size", AsInt64(value("intermediate_size")));
    flags->Bool("moe_router_pre_softmax", architecture, false, "top-k weights renormalised");
    flags->String("moe_layer_freq", architecture, "1");
  } else {
    flags->Int("moe_ffn_hidden_size", "moe_intermediate_size",
               AsInt64(value("moe_intermediate_size")));
    const bool normalised = AsBool(value("norm_topk_prob"));
    flags->Bool("moe_router_pre_softmax", "norm_topk_prob", !normalised,
                normalised ? "true" : "false");
    flags->String("moe_layer_freq", "decoder_sparse_step and mlp_only_layers",
                  QwenMoeLayerFreq(hf, arch, flags));
  }
  flags->Bool("moe_shared_expert_gate", architecture, qwen2,
              qwen2 ? "a gated shared expert" : "no shared expert");
  if (!qwen2) {
    flags->Int("moe_shared_expert_intermediate_size", architecture, 0);
    return;
  }
  flags->Int("moe_shared_expert_intermediate_size", "shared_expert_intermediate_size",
             AsInt64(value("shared_expert_intermediate_size")));
}

namespace {

// DeepseekV3Config's routing fields for the model (HfMoeDimsFromConfig checked that
// DeepSeek-V3 computes it: dense layers first, shared experts a multiple of the width).
void AddDeepseekMoeFields(const ModelConfig& m, std::map<std::string, std::string>* fields) {
  auto& f = *fields;
  const std::vector<bool> moe = ParseMoeLayerFreq(m.moe_layer_freq(), m.num_layers())
                                    .value_or(std::vector<bool>(m.num_layers(), true));
  const int64_t dense = std::find(moe.begin(), moe.end(), true) - moe.begin();
  const int64_t width = m.moe_ffn_hidden_size() > 0 ? m.moe_ffn_hidden_size() : m.ffn_hidden_size();
  const bool limited = m.moe_router_group_topk() > 0;
  f["n_routed_experts"] = absl::StrCat(m.num_experts());
  f["moe_intermediate_size"] = absl::StrCat(width);
  f["n_shared_experts"] = absl::StrCat(m.moe_shared_expert_intermediate_size() / width);
  f["first_k_dense_replace"] = absl::StrCat(dense);
  f["n_group"] = absl::StrCat(limited ? m.moe_router_num_groups() : 1);
  f["topk_group"] = absl::StrCat(limited ? m.moe_router_group_topk() : 1);
  f["norm_topk_prob"] = m.moe_router_topk() > 1 ? "true" : "false";
  // Megatron's factor 0 is no scaling, DeepSeek's 1.0.
  const float scaling = m.moe_router_topk_scaling_factor();
  f["routed_scaling_factor"] = PythonFloat(scaling > 0 ? scaling : 1.0f);
  f["scoring_func"] = "\"sigmoid\"";
  f["topk_method"] = "\"noaux_tc\"";
}

}  // namespace

void AddMoeConfigJsonFields(const ModelConfig& m, const HfArchitecture& arch,
                            std::map<std::string, std::string>* fields) {
  if (!arch.moe) return;
  auto& f = *fields;
  const std::string model_type = arch.model_type;
  f["num_experts_per_tok"] = absl::StrCat(m.moe_router_topk());
  if (arch.mla) {
    AddDeepseekMoeFields(m, &f);
    return;
  }
  f["output_router_logits"] = "false";
  f["router_aux_loss_coef"] = PythonFloat(LoadBalancingCoeff(m, MoeLoadBalancingType::kAuxLoss));
  if (model_type == "mixtral") {
    f["num_local_experts"] = absl::StrCat(m.num_experts());
    f["intermediate_size"] = absl::StrCat(m.moe_ffn_hidden_size());
    f["router_jitter_noise"] = "0.0";
    f["sliding_window"] = "null";
    return;
  }
  f["num_experts"] = absl::StrCat(m.num_experts());
  f["moe_intermediate_size"] = absl::StrCat(m.moe_ffn_hidden_size());
  f["norm_topk_prob"] = m.moe_router_pre_softmax() ? "false" : "true";
  f["decoder_sparse_step"] = "1";
  std::vector<int64_t> dense;
  const std::vector<bool> moe = ParseMoeLayerFreq(m.moe_layer_freq(), m.num_layers())
                                    .value_or(std::vector<bool>(m.num_layers(), true));
  for (size_t i = 0; i < moe.size(); ++i) {
    if (!moe[i]) dense.push_back(int64_t(i));
  }
  // As json.dumps(indent=2) writes a list two levels deep.
  f["mlp_only_layers"] =
      dense.empty() ? "[]" : absl::StrCat("[\n    ", absl::StrJoin(dense, ",\n    "), "\n  ]");
  f["sliding_window"] = "null";
  f["use_sliding_window"] = "false";
  if (model_type == "qwen2_moe") {
    f["shared_expert_intermediate_size"] =
        absl::StrCat(m.moe_shared_expert_intermediate_size());
    f["qkv_bias"] = "true";
    f["max_window_layers"] = absl::StrCat(m.num_layers());
  } else {
    f["attention_bias"] = "false";
  }
}

}  // namespace conveyor
