#include "trainer/hf/llama_config_json.h"

#include <cmath>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "trainer/hf/hf_config_fields.h"
#include "trainer/hf/json_text.h"
#include "trainer/hf/mla_config_json.h"
#include "trainer/hf/model_flags_from_file.h"
#include "trainer/hf/moe_config_json.h"
#include "trainer/hf/positions_config_json.h"

namespace conveyor {
namespace {

std::string IdOrNull(int64_t id) { return id < 0 ? "null" : absl::StrCat(id); }

// Sorted keys, two-space indent, as json.dumps(d, indent=2, sort_keys=True) + "\n".
std::string SortedJsonObject(const std::map<std::string, std::string>& fields) {
  std::vector<std::string> lines;
  for (const auto& [key, value] : fields)
    lines.push_back(absl::StrCat("  ", JsonQuote(key), ": ", value));
  return absl::StrCat("{\n", absl::StrJoin(lines, ",\n"), "\n}\n");
}

// RoPE's base period: transformers 5 writes {"rope_parameters": {"rope_theta": ...,
// "rope_type": "default"}}, earlier versions "rope_theta" (and "rope_scaling").
double RopeTheta(const Json& hf, const HfArchitecture& arch) {
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    const Json& parameters = MemberOrNull(hf, key);
    if (parameters.is_object() && MemberOrNull(parameters, "rope_theta").is_number()) {
      return AsDouble(MemberOrNull(parameters, "rope_theta"));
    }
  }
  return AsDouble(HfFieldOrDefault(hf, arch, "rope_theta"));
}

}  // namespace

absl::Status ApplyLlamaConfigJson(const Json& hf, const std::string& path,
                                  const HfArchitecture& arch, Config* config) {
  if (!hf.is_object())
    return absl::InvalidArgumentError(absl::StrCat(path, " is not a JSON object"));
  ModelFlagsFromFile flags(path, config->mutable_model());
  // The fields' types, bounds and presence were checked against the table
  // (CheckHfConfigFields); an absent field takes transformers' default for `arch`.
  auto value = [&](const char* key) { return HfFieldOrDefault(hf, arch, key); };
  const int64_t heads = AsInt64(MemberOrNull(hf, "num_attention_heads"));
  const int64_t hidden = AsInt64(MemberOrNull(hf, "hidden_size"));
  const Json groups = value("num_key_value_heads");
  const Json head_dim = value("head_dim");
  flags.Int("num_layers", "num_hidden_layers", AsInt64(MemberOrNull(hf, "num_hidden_layers")));
  flags.Int("hidden_size", "hidden_size", hidden);
  flags.Int("ffn_hidden_size", "intermediate_size", AsInt64(MemberOrNull(hf, "intermediate_size")));
  flags.Int("num_attention_heads", "num_attention_heads", heads);
  flags.Int("num_query_groups", "num_key_value_heads", groups.is_null() ? heads : AsInt64(groups));
  flags.Int("kv_channels", "head_dim",
            head_dim.is_null() ? (heads > 0 ? hidden / heads : 0) : AsInt64(head_dim));
  flags.Int("vocab_size", "vocab_size", AsInt64(MemberOrNull(hf, "vocab_size")));
  flags.Int("max_position_embeddings", "max_position_embeddings",
            AsInt64(value("max_position_embeddings")));
  flags.Float("rotary_base", "rope_theta", RopeTheta(hf, arch));
  flags.Float("norm_epsilon", "rms_norm_eps", AsDouble(value("rms_norm_eps")));
  const bool tied = AsBool(value("tie_word_embeddings"));
  flags.Bool("untie_embeddings_and_output_weights", "tie_word_embeddings", !tied,
             tied ? "true" : "false");
  const std::string architecture = absl::StrCat("architectures = [\"", arch.class_name, "\"]");
  const std::string positions = ApplyRopeScalingJson(hf, arch, &flags);
  flags.String("position_embedding_type", positions == "yarn" ? "rope_scaling" : architecture,
               positions);
  flags.String("normalization", architecture, "RMSNorm");
  flags.Float("rotary_percent", architecture, 1.0);  // every channel rotates
  flags.Bool("swiglu", architecture, true, "SwiGLU");
  flags.Bool("disable_bias_linear", architecture, true, "bias-free linears");
  flags.Bool("add_qkv_bias", architecture, arch.qkv_bias,
             arch.qkv_bias ? "q/k/v biases" : "no q/k/v biases");
  if (!arch.mla) {  // multi-latent attention's norms are its latents' (mla_config_json.h)
    flags.Bool("qk_layernorm", architecture, arch.qk_norm,
               arch.qk_norm ? "per-head q/k norms" : "no q/k norms");
  }
  ApplyMoeConfigJson(hf, arch, &flags);
  ApplyMlaConfigJson(hf, arch, &flags);
  // Padding rows would add a logit of 0 to every softmax, so the imported model would
  // not be the file's: no padding unless asked for (or the TP size does not divide
  // the vocabulary).
  if (!config->model().has_make_vocab_size_divisible_by()) {
    config->mutable_model()->set_make_vocab_size_divisible_by(1);
  }
  ApplySlidingWindowJson(hf, arch, config->model().seq_length(), &flags);
  return flags.Status();
}

std::string LlamaConfigJson(const Config& config, const HfArchitecture& arch,
                            const HfTokenIds& ids, const std::string& torch_dtype) {
  const ModelConfig& m = config.model();
  std::map<std::string, std::string> fields = {
      {"architectures", absl::StrCat("[\n    ", JsonQuote(arch.class_name), "\n  ]")},
      {"model_type", JsonQuote(arch.model_type)},
      {"attention_dropout", PythonFloat(m.attention_dropout())},
      {"bos_token_id", IdOrNull(ids.bos)},
      {"eos_token_id", IdOrNull(ids.eos)},
      {"head_dim", absl::StrCat(m.kv_channels())},
      {"hidden_act", "\"silu\""},
      {"hidden_size", absl::StrCat(m.hidden_size())},
      {"initializer_range", PythonFloat(m.init_method_std())},
      {"intermediate_size", absl::StrCat(m.ffn_hidden_size())},
      {"max_position_embeddings", absl::StrCat(m.max_position_embeddings())},
      {"num_attention_heads", absl::StrCat(m.num_attention_heads())},
      {"num_hidden_layers", absl::StrCat(m.num_layers())},
      {"num_key_value_heads", absl::StrCat(m.num_query_groups())},
      {"rms_norm_eps", PythonFloat(m.norm_epsilon())},
      {"rope_scaling", "null"},
      {"rope_theta", PythonFloat(m.rotary_base())},
      {"tie_word_embeddings", m.untie_embeddings_and_output_weights() ? "false" : "true"},
      {"torch_dtype", JsonQuote(torch_dtype)},
      {"use_cache", "true"},
      {"vocab_size", absl::StrCat(m.vocab_size())},
  };
  const std::string model_type = arch.model_type;
  if (model_type == "llama") {
    fields["attention_bias"] = "false";
    fields["mlp_bias"] = "false";
    fields["pretraining_tp"] = "1";
  } else if (model_type == "mistral") {
    fields["sliding_window"] = "null";
  } else if (model_type == "qwen2" || model_type == "qwen3") {
    fields["sliding_window"] = "null";
    fields["use_sliding_window"] = "false";
    fields["max_window_layers"] = absl::StrCat(m.num_layers());
    if (model_type == "qwen3") fields["attention_bias"] = "false";
  }
  AddMoeConfigJsonFields(m, arch, &fields);
  AddMlaConfigJsonFields(m, arch, &fields);
  AddPositionsConfigJsonFields(m, arch, &fields);
  return SortedJsonObject(fields);
}

std::string GenerationConfigJson(const HfTokenIds& ids) {
  std::map<std::string, std::string> fields = {{"_from_model_config", "true"}};
  if (ids.bos >= 0) fields["bos_token_id"] = absl::StrCat(ids.bos);
  if (ids.eos >= 0) fields["eos_token_id"] = absl::StrCat(ids.eos);
  return SortedJsonObject(fields);
}

}  // namespace conveyor
