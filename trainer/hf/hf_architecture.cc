#include "trainer/hf/hf_architecture.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "trainer/hf/gpt2_mapping.h"

namespace conveyor {
namespace {

const std::vector<HfArchitecture>& Architectures() {
  static const auto* table = new std::vector<HfArchitecture>{
      {"GPT2LMHeadModel", "gpt2", HfFamily::kGpt2, false, false},
      {"LlamaForCausalLM", "llama", HfFamily::kLlama, false, false},
      {"MistralForCausalLM", "mistral", HfFamily::kLlama, false, false},
      {"Qwen2ForCausalLM", "qwen2", HfFamily::kLlama, true, false},
      {"Qwen3ForCausalLM", "qwen3", HfFamily::kLlama, false, true},
  };
  return *table;
}

// A class name of the table.
const HfArchitecture& Named(absl::string_view class_name) {
  for (const HfArchitecture& a : Architectures()) {
    if (class_name == a.class_name) return a;
  }
  return Architectures().front();  // unreachable for the names below
}

}  // namespace

absl::StatusOr<const HfArchitecture*> HfArchitectureOf(const JsonValue& hf_config,
                                                       const std::string& path) {
  const JsonValue& classes = hf_config["architectures"];
  const JsonValue& model_type = hf_config["model_type"];
  for (const HfArchitecture& a : Architectures()) {
    if (classes.is_array() && classes.size() > 0) {
      if (classes[0].str() == a.class_name) return &a;
    } else if (model_type.str() == a.model_type) {
      return &a;
    }
  }
  const std::string named = classes.is_array() && classes.size() > 0
                                ? absl::StrCat("architectures [\"", classes[0].str(), "\"]")
                                : absl::StrCat("model_type \"", model_type.str(), "\"");
  return absl::InvalidArgumentError(
      absl::StrCat(path, " names ", named,
                   ", which Conveyor cannot load; supported: ", SupportedHfArchitectures()));
}

absl::StatusOr<const HfArchitecture*> HfArchitectureForExport(const Config& config,
                                                              const std::string& requested) {
  const bool gpt2 = CheckGpt2Architecture(config).ok();
  const bool qkv_bias = config.model().add_qkv_bias();
  const bool qk_norm = config.model().qk_layernorm();
  if (requested.empty()) {
    return &Named(gpt2       ? "GPT2LMHeadModel"
                  : qk_norm  ? "Qwen3ForCausalLM"
                  : qkv_bias ? "Qwen2ForCausalLM"
                             : "LlamaForCausalLM");
  }
  const HfArchitecture* wanted = nullptr;
  for (const HfArchitecture& a : Architectures()) wanted = requested == a.class_name ? &a : wanted;
  if (wanted == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("--architecture ", requested, " is not one of ", SupportedHfArchitectures()));
  }
  if ((wanted->family == HfFamily::kGpt2) != gpt2 ||
      (wanted->family == HfFamily::kLlama &&
       (wanted->qkv_bias != qkv_bias || wanted->qk_norm != qk_norm))) {
    const absl::string_view holder =
        gpt2                   ? "GPT-2's architecture"
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
  for (const HfArchitecture& a : Architectures()) names.push_back(a.class_name);
  return absl::StrJoin(names, ", ");
}

}  // namespace conveyor
