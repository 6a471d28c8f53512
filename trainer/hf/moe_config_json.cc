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

}  // namespace

void ApplyMoeConfigJson(const Json& hf, const HfArchitecture& arch,
                        ModelFlagsFromFile* flags) {
  if (!arch.moe) return;
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

void AddMoeConfigJsonFields(const ModelConfig& m, const HfArchitecture& arch,
                            std::map<std::string, std::string>* fields) {
  if (!arch.moe) return;
  auto& f = *fields;
  const std::string model_type = arch.model_type;
  f["num_experts_per_tok"] = absl::StrCat(m.moe_router_topk());
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
