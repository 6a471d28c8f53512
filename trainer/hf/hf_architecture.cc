#include "trainer/hf/hf_architecture.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "trainer/hf/gpt2_mapping.h"

namespace conveyor {

const std::vector<HfArchitecture>& HfArchitectures() {
  static const auto* table = new std::vector<HfArchitecture>{
      {"GPT2LMHeadModel", "gpt2", HfFamily::kGpt2, false, false},
      {"LlamaForCausalLM", "llama", HfFamily::kLlama, false, false},
      {"MistralForCausalLM", "mistral", HfFamily::kLlama, false, false},
      {"Qwen2ForCausalLM", "qwen2", HfFamily::kLlama, true, false},
      {"Qwen3ForCausalLM", "qwen3", HfFamily::kLlama, false, true},
      {"MixtralForCausalLM", "mixtral", HfFamily::kLlama, false, false, true},
      {"Qwen2MoeForCausalLM", "qwen2_moe", HfFamily::kLlama, true, false, true},
      {"Qwen3MoeForCausalLM", "qwen3_moe", HfFamily::kLlama, false, true, true},
      {"DeepseekV3ForCausalLM", "deepseek_v3", HfFamily::kLlama, false, false, true, true},
  };
  return *table;
}

namespace {

// A class name of the table.
const HfArchitecture& Named(absl::string_view class_name) {
  for (const HfArchitecture& a : HfArchitectures()) {
    if (class_name == a.class_name) return a;
  }
  return HfArchitectures().front();  // unreachable for the names below
}

}  // namespace

absl::StatusOr<const HfArchitecture*> HfArchitectureOf(const Json& hf_config,
                                                       const std::string& path) {
  if (!hf_config.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path, " is not a JSON object"));
  }
  const Json& classes = MemberOrNull(hf_config, "architectures");
  const Json& model_type = MemberOrNull(hf_config, "model_type");
  const bool has_class = classes.is_array() && classes.size() > 0;
  if ((!classes.is_null() && !classes.is_array()) || (has_class && !classes[0].is_string())) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": architectures must be a list of class names, like [\"LlamaForCausalLM\"]"));
  }
  if (!model_type.is_null() && !model_type.is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": model_type must be a string, like \"llama\""));
  }
  const HfArchitecture* found = nullptr;
  for (const HfArchitecture& a : HfArchitectures()) {
    if (has_class ? AsString(classes[0]) == a.class_name : AsString(model_type) == a.model_type) {
      found = &a;
    }
  }
  const std::string named = has_class
                                ? absl::StrCat("architectures [\"", AsString(classes[0]), "\"]")
                                : absl::StrCat("model_type \"", AsString(model_type), "\"");
  if (found == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " names ", named,
                     ", which Conveyor cannot load; supported: ", SupportedHfArchitectures()));
  }
  // The class decides the weights' layout, model_type the fields' meaning: a file whose
  // two disagree would be read with the wrong table.
  if (has_class && !model_type.is_null() && AsString(model_type) != found->model_type) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, " names ", named, " but model_type \"", AsString(model_type), "\"; ",
        found->class_name, " is model_type \"", found->model_type,
        "\": correct whichever of the two is wrong"));
  }
  return found;
}

absl::StatusOr<const HfArchitecture*> HfArchitectureForExport(const Config& config,
                                                              const std::string& requested) {
  const HfArchitecture& deepseek = Named("DeepseekV3ForCausalLM");
  if (config.model().multi_latent_attention()) {
    if (!requested.empty() && requested != deepseek.class_name) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--architecture ", requested,
          " cannot hold this model (multi-latent attention: ", deepseek.class_name, ")"));
    }
    return &deepseek;
  }
  if (requested == deepseek.class_name) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--architecture ", requested,
        " cannot hold this model: it has no multi-latent attention (--multi-latent-attention)"));
  }
  const bool gpt2 = CheckGpt2Architecture(config).ok();
  const bool qkv_bias = config.model().add_qkv_bias();
  const bool qk_norm = config.model().qk_layernorm();
  const bool moe = config.model().num_experts() > 0;
  if (requested.empty()) {
    if (moe && !gpt2) {
      return &Named(qk_norm ? "Qwen3MoeForCausalLM"
                    : qkv_bias ? "Qwen2MoeForCausalLM"
                               : "MixtralForCausalLM");
    }
    return &Named(gpt2                                ? "GPT2LMHeadModel"
                  : qk_norm                           ? "Qwen3ForCausalLM"
                  : qkv_bias                          ? "Qwen2ForCausalLM"
                  : !config.model().window_size().empty() ? "MistralForCausalLM"
                                                      : "LlamaForCausalLM");
  }
  const HfArchitecture* wanted = nullptr;
  for (const HfArchitecture& a : HfArchitectures()) wanted = requested == a.class_name ? &a : wanted;
  if (wanted == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("--architecture ", requested, " is not one of ", SupportedHfArchitectures()));
  }
  if ((wanted->family == HfFamily::kGpt2) != gpt2 ||
      (wanted->family == HfFamily::kLlama &&
       (wanted->qkv_bias != qkv_bias || wanted->qk_norm != qk_norm || wanted->moe != moe))) {
    const absl::string_view holder =
        gpt2                   ? "GPT-2's architecture"
        : moe && qk_norm       ? "a mixture of experts with per-head q/k norms: Qwen3MoeForCausalLM"
        : moe && qkv_bias      ? "a mixture of experts with q/k/v biases: Qwen2MoeForCausalLM"
        : moe                  ? "a mixture of experts: MixtralForCausalLM"
        : qk_norm && !qkv_bias ? "a Llama-family model with per-head q/k norms: Qwen3ForCausalLM"
        : qk_norm              ? "a Llama-family model with q/k biases and per-head q/k norms: none"
        : qkv_bias
            ? "a Llama-family model with q/k/v biases: Qwen2ForCausalLM"
            : "a Llama-family model without q/k/v biases: LlamaForCausalLM or MistralForCausalLM";
    return absl::FailedPreconditionError(
        absl::StrCat("--architecture ", requested, " cannot hold this model (", holder, ")"));
  }
  return wanted;
}

std::string SupportedHfArchitectures() {
  std::vector<std::string> names;
  for (const HfArchitecture& a : HfArchitectures()) names.push_back(a.class_name);
  return absl::StrJoin(names, ", ");
}

}  // namespace conveyor
