#include "trainer/hf/moe_mapping.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "model/moe_layer_pattern.h"
#include "proto/config_choices.h"
#include "trainer/config/model_from_config.h"

namespace conveyor {
namespace {

// A gated MLP of width `ffn`: Conveyor's `c`.fc1 = [gate | up] and fc2 from HF's
// `gate`, `up` and `down` (full names).
void AppendGatedMlp(const std::string& c, const std::string& gate, const std::string& up,
                    const std::string& down, int64_t hidden, int64_t ffn,
                    std::vector<TensorPair>* pairs) {
  pairs->push_back({c + ".fc1.weight",
                    {2 * ffn, hidden},
                    Rows::kGateUp,
                    {gate, up},
                    {{ffn, hidden}, {ffn, hidden}}});
  pairs->push_back({c + ".fc2.weight", {hidden, ffn}, Rows::kSame, {down}, {{hidden, ffn}}});
}

// The problems of routing settings no Mixtral or Qwen MoE router computes.
void CheckRouter(const ModelConfig& m, std::vector<std::string>* problems) {
  if (ChoiceOr(m.moe_router_score_function(), MoeRouterScoreFunction::kSoftmax) !=
      MoeRouterScoreFunction::kSoftmax) {
    problems->push_back(
        "--moe-router-score-function is not softmax; Mixtral's and Qwen's routers take a softmax");
  }
  if (m.moe_router_topk_scaling_factor() != 0.0f) {
    problems->push_back(
        "--moe-router-topk-scaling-factor is set; Mixtral's and Qwen's routers do not scale "
        "their weights");
  }
  if (m.moe_router_enable_expert_bias()) {
    problems->push_back(
        "--moe-router-enable-expert-bias is set; Mixtral's and Qwen's routers have no expert "
        "bias");
  }
}

// The problems of a model DeepSeek-V3's MoE layers do not compute.
void CheckDeepseek(const ModelConfig& m, const HfMoeDims& moe, std::vector<std::string>* problems) {
  if (ChoiceOr(m.moe_router_score_function(), MoeRouterScoreFunction::kSoftmax) !=
      MoeRouterScoreFunction::kSigmoid) {
    problems->push_back(
        "--moe-router-score-function is not sigmoid; DeepSeek-V3's router takes "
        "sigmoid scores");
  }
  if (!moe.expert_bias) {
    problems->push_back(
        "--moe-router-enable-expert-bias is unset; DeepSeek-V3's router has an expert bias "
        "(e_score_correction_bias)");
  }
  const RouterSpec router = MoeShapeFromConfig(m).router;
  if (router.group_topk > 0 && router.GroupScoreTopk() != kDeepseekGroupScoreTopk) {
    problems->push_back(absl::StrCat(
        "expert groups are scored by their ", router.GroupScoreTopk(),
        " best experts (--moe-router-group-score-topk ", m.moe_router_group_score_topk(),
        ", --moe-router-topk ", m.moe_router_topk(), ", --moe-router-group-topk ",
        m.moe_router_group_topk(), "); DeepSeek-V3 scores a group by its ",
        kDeepseekGroupScoreTopk, " best"));
  }
  if (moe.shared_gate) {
    problems->push_back(
        "--moe-shared-expert-gate is set; DeepSeek-V3's shared experts have no gate");
  }
  if (moe.shared_ffn % moe.ffn != 0) {
    problems->push_back(absl::StrCat("--moe-shared-expert-intermediate-size ", moe.shared_ffn,
                                     " is not a multiple of the "
                                     "expert width ",
                                     moe.ffn,
                                     "; DeepSeek-V3 has n_shared_experts experts of that width"));
  }
  const auto first_moe = std::find(moe.layers.begin(), moe.layers.end(), true);
  if (std::find(first_moe, moe.layers.end(), false) != moe.layers.end()) {
    problems->push_back(
        "--moe-layer-freq makes a layer after an MoE layer dense; DeepSeek-V3's dense layers "
        "are the first (first_k_dense_replace)");
  }
}

}  // namespace

HfMoeDims HfMoeDimsFromConfig(const ModelConfig& m, std::vector<std::string>* problems) {
  HfMoeDims moe;
  if (m.num_experts() <= 0) return moe;
  if (!m.multi_latent_attention()) CheckRouter(m, problems);
  moe.experts = m.num_experts();
  moe.ffn = m.moe_ffn_hidden_size() > 0 ? m.moe_ffn_hidden_size() : m.ffn_hidden_size();
  moe.shared_ffn = m.moe_shared_expert_intermediate_size();
  moe.shared_gate = m.moe_shared_expert_gate();
  moe.layers = ParseMoeLayerFreq(m.moe_layer_freq(), m.num_layers())
                   .value_or(std::vector<bool>(m.num_layers(), true));
  const bool dense_layers = moe.layers != std::vector<bool>(m.num_layers(), true);
  if (m.multi_latent_attention()) {
    moe.names = HfMoeNames::kDeepseek;
    moe.expert_bias = m.moe_router_enable_expert_bias();
    CheckDeepseek(m, moe, problems);
    return moe;
  }
  if (m.add_qkv_bias() || m.qk_layernorm()) {
    moe.names = HfMoeNames::kQwen;
    if (m.qk_layernorm() && moe.shared_ffn > 0) {
      problems->push_back(
          "--moe-shared-expert-intermediate-size is set; Qwen3-MoE (--qk-layernorm) has no "
          "shared expert");
    }
    if (m.qk_layernorm() && moe.shared_gate) {
      problems->push_back("--moe-shared-expert-gate is set; Qwen3-MoE has no shared expert");
    }
    if (!m.qk_layernorm() && (moe.shared_ffn == 0 || !moe.shared_gate)) {
      problems->push_back(
          "Qwen2-MoE (--add-qkv-bias) has a gated shared expert: set "
          "--moe-shared-expert-intermediate-size and --moe-shared-expert-gate");
    }
    return moe;
  }
  moe.names = HfMoeNames::kMixtral;
  if (m.moe_router_pre_softmax()) {
    problems->push_back(
        "--moe-router-pre-softmax is set; Mixtral renormalises its top-k weights (Qwen-MoE "
        "with norm_topk_prob false does not: --add-qkv-bias or --qk-layernorm)");
  }
  if (dense_layers) {
    problems->push_back("--moe-layer-freq makes some layers dense; every Mixtral layer is MoE");
  }
  if (moe.shared_ffn > 0 || moe.shared_gate) {
    problems->push_back(
        "--moe-shared-expert-intermediate-size or --moe-shared-expert-gate is set; Mixtral has "
        "no shared expert");
  }
  return moe;
}

void AppendMoeLayerPairs(const HfMoeDims& moe, int64_t hidden, int64_t layer,
                         std::vector<TensorPair>* pairs) {
  const std::string c = absl::StrCat("layers.", layer, ".mlp.");
  const bool mixtral = moe.names == HfMoeNames::kMixtral;
  const bool deepseek = moe.names == HfMoeNames::kDeepseek;
  const std::string h =
      absl::StrCat("model.layers.", layer, mixtral ? ".block_sparse_moe." : ".mlp.");
  pairs->push_back({c + "router.weight",
                    {moe.experts, hidden},
                    Rows::kSame,
                    {h + "gate.weight"},
                    {{moe.experts, hidden}}});
  if (moe.expert_bias) {
    pairs->push_back({c + "router.expert_bias",
                      {moe.experts},
                      Rows::kSame,
                      {h + "gate.e_score_correction_bias"},
                      {{moe.experts}}});
  }
  for (int64_t e = 0; e < moe.experts; ++e) {
    const std::string expert = absl::StrCat(h, "experts.", e, ".");
    if (mixtral) {
      AppendGatedMlp(absl::StrCat(c, "experts.", e), expert + "w1.weight", expert + "w3.weight",
                     expert + "w2.weight", hidden, moe.ffn, pairs);
    } else {
      AppendGatedMlp(absl::StrCat(c, "experts.", e), expert + "gate_proj.weight",
                     expert + "up_proj.weight", expert + "down_proj.weight", hidden, moe.ffn,
                     pairs);
    }
  }
  if (moe.shared_ffn > 0) {
    const std::string shared = h + (deepseek ? "shared_experts." : "shared_expert.");
    AppendGatedMlp(c + "shared_experts", shared + "gate_proj.weight", shared + "up_proj.weight",
                   shared + "down_proj.weight", hidden, moe.shared_ffn, pairs);
  }
  if (moe.shared_gate) {
    pairs->push_back({c + "shared_experts.gate.weight",
                      {1, hidden},
                      Rows::kSame,
                      {h + "shared_expert_gate.weight"},
                      {{1, hidden}}});
  }
}

}  // namespace conveyor
