#include "trainer/hf/positions_config_json.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/rope_scaling.h"
#include "trainer/config/attention_positions.h"
#include "trainer/hf/hf_config_fields.h"
#include "trainer/hf/json_text.h"

namespace conveyor {
namespace {

// rope_scaling's kind: {"rope_type": "llama3", ...} or, older, {"type": "linear"}.
std::string ScalingType(const Json& scaling) {
  if (MemberOrNull(scaling, "rope_type").is_string())
    return AsString(MemberOrNull(scaling, "rope_type"));
  if (MemberOrNull(scaling, "type").is_string()) return AsString(MemberOrNull(scaling, "type"));
  return "default";
}

double NumberOr(const Json& v, double fallback) { return v.is_number() ? AsDouble(v) : fallback; }

// Llama 3.1's four numbers, each required (transformers reads them without defaults).
void ApplyLlama3(const Json& s, const std::string& key, ModelFlagsFromFile* flags) {
  for (const char* field :
       {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"}) {
    if (!MemberOrNull(s, field).is_number()) {
      flags->Unsupported(absl::StrCat(key, " of type \"llama3\" has no number ", field,
                                      " (transformers requires it)"));
      return;
    }
  }
  flags->Bool("use_rope_scaling", key + ".rope_type", true, "\"llama3\"");
  flags->Float("rope_scaling_factor", key + ".factor", AsDouble(MemberOrNull(s, "factor")));
  flags->Float("rope_scaling_low_freq_factor", key + ".low_freq_factor",
               AsDouble(MemberOrNull(s, "low_freq_factor")));
  flags->Float("rope_scaling_high_freq_factor", key + ".high_freq_factor",
               AsDouble(MemberOrNull(s, "high_freq_factor")));
  flags->Int("rope_scaling_original_max_position_embeddings",
             key + ".original_max_position_embeddings",
             AsInt64(MemberOrNull(s, "original_max_position_embeddings")));
}

// YaRN as transformers reads it: the original context defaults to
// max_position_embeddings, beta_fast and beta_slow to 32 and 1 (also when 0), the
// concentration factor to m(s, mscale) / m(s, mscale_all_dim) when both are nonzero,
// else m(s, 1); an explicit attention_factor must be that value.
void ApplyYarn(const Json& hf, const HfArchitecture& arch, const Json& s, const std::string& key,
               ModelFlagsFromFile* flags) {
  const double max_positions = AsDouble(HfFieldOrDefault(hf, arch, "max_position_embeddings"));
  const Json& original = MemberOrNull(s, "original_max_position_embeddings");
  const double context = NumberOr(original, max_positions);
  double factor = NumberOr(MemberOrNull(s, "factor"), 0.0);
  if (!MemberOrNull(s, "factor").is_number() && original.is_number() && context > 0) {
    factor = max_positions / context;  // transformers 5 without a factor
  } else if (original.is_number() && std::fabs(max_positions / context - factor) > 1e-9 * factor) {
    flags->Unsupported(
        absl::StrCat(key, ".factor = ", PythonFloat(factor), " but max_position_embeddings / ", key,
                     ".original_max_position_embeddings = ", PythonFloat(max_positions / context),
                     ": transformers 4 scales by the ratio, 5 by factor; make them agree"));
  }
  const double mscale = NumberOr(MemberOrNull(s, "mscale"), 0.0),
               all_dim = NumberOr(MemberOrNull(s, "mscale_all_dim"), 0.0);
  const bool both = mscale != 0.0 && all_dim != 0.0;
  RopeScaling scaling;
  scaling.kind = RopeScalingKind::kYarn;
  scaling.factor = factor;
  scaling.mscale = both ? mscale : 1.0;
  scaling.mscale_all_dim = both ? all_dim : 0.0;
  const double concentration = RopeConcentration(scaling);
  if (MemberOrNull(s, "attention_factor").is_number() &&
      std::fabs(AsDouble(MemberOrNull(s, "attention_factor")) - concentration) >
          1e-6 * concentration) {
    flags->Unsupported(absl::StrCat(
        key, ".attention_factor = ", PythonFloat(AsDouble(MemberOrNull(s, "attention_factor"))),
        " is not YaRN's concentration factor from mscale and mscale_all_dim (",
        PythonFloat(concentration), "), the only one Conveyor computes"));
  }
  flags->Float("rotary_scaling_factor", key + ".factor", factor);
  flags->Int("yarn_original_max_position_embeddings", key + ".original_max_position_embeddings",
             static_cast<int64_t>(context));
  const double fast = NumberOr(MemberOrNull(s, "beta_fast"), 0.0),
               slow = NumberOr(MemberOrNull(s, "beta_slow"), 0.0);
  flags->Float("yarn_beta_fast", key + ".beta_fast", fast != 0.0 ? fast : 32.0);
  flags->Float("yarn_beta_slow", key + ".beta_slow", slow != 0.0 ? slow : 1.0);
  flags->Float("mscale", key + ".mscale", scaling.mscale);
  flags->Float("mscale_all_dim", key + ".mscale_all_dim", scaling.mscale_all_dim);
  const bool truncate =
      MemberOrNull(s, "truncate").is_boolean() ? AsBool(MemberOrNull(s, "truncate")) : true;
  flags->Bool("yarn_correction_range_round_to_int", key + ".truncate", truncate,
              truncate ? "true" : "false");
}

// Which layers slide by the file: every one of Mistral's (and Mixtral's); Qwen's only
// with use_sliding_window (else Qwen2Config.__post_init__ drops the window), those
// layer_types calls sliding, else from max_window_layers on; Llama has none. Empty: none.
std::vector<bool> SlidingLayersOf(const Json& hf, const HfArchitecture& arch,
                                  ModelFlagsFromFile* flags) {
  const int64_t layers = AsInt64(MemberOrNull(hf, "num_hidden_layers"));
  const std::string model_type = arch.model_type;
  if (model_type == "mistral" || model_type == "mixtral") return std::vector<bool>(layers, true);
  if (!arch.qkv_bias && !arch.qk_norm) return {};
  std::vector<bool> kinds;
  const Json& types = MemberOrNull(hf, "layer_types");
  for (const Json& kind : types) {  // empty unless an array
    kinds.push_back(AsString(kind) == "sliding_attention");
    if (AsString(kind) != "sliding_attention" && AsString(kind) != "full_attention") {
      flags->Unsupported(absl::StrCat("layer_types holds ", JsonValueText(kind),
                                      ": Conveyor supports \"full_attention\" and "
                                      "\"sliding_attention\""));
    }
  }
  if (!AsBool(HfFieldOrDefault(hf, arch, "use_sliding_window"))) return {};
  if (types.is_array()) return kinds;
  std::vector<bool> slides;
  const int64_t first = AsInt64(HfFieldOrDefault(hf, arch, "max_window_layers"));
  for (int64_t l = 0; l < layers; ++l) slides.push_back(arch.moe || l >= first);
  return slides;
}

std::string LayerList(const std::vector<bool>& slides) {
  std::vector<std::string> entries;
  for (const bool s : slides) entries.push_back(s ? "1" : "0");
  return absl::StrCat("[", absl::StrJoin(entries, ","), "]");
}

// A JSON object as json.dumps(indent=2, sort_keys=True) writes it one level down.
std::string NestedObject(const std::map<std::string, std::string>& fields) {
  std::vector<std::string> lines;
  for (const auto& [key, value] : fields)
    lines.push_back(absl::StrCat("    ", JsonQuote(key), ": ", value));
  return absl::StrCat("{\n", absl::StrJoin(lines, ",\n"), "\n  }");
}

std::string RopeScalingObject(const ModelConfig& m) {
  if (m.position_embedding_type() == "yarn") {
    const RopeScaling s = RopeScalingFromConfig(m, PositionEmbeddingType::kYarn);
    return NestedObject(
        {{"attention_factor", PythonFloat(RopeConcentration(s))},
         {"beta_fast", PythonFloat(s.beta_fast)},
         {"beta_slow", PythonFloat(s.beta_slow)},
         {"factor", PythonFloat(s.factor)},
         {"mscale", PythonFloat(s.mscale)},
         {"mscale_all_dim", PythonFloat(s.mscale_all_dim)},
         {"original_max_position_embeddings", absl::StrCat(s.original_max_positions)},
         {"rope_type", "\"yarn\""},
         {"truncate", s.round_to_int ? "true" : "false"}});
  }
  if (!m.use_rope_scaling()) return "null";
  return NestedObject({{"factor", PythonFloat(m.rope_scaling_factor())},
                       {"high_freq_factor", PythonFloat(m.rope_scaling_high_freq_factor())},
                       {"low_freq_factor", PythonFloat(m.rope_scaling_low_freq_factor())},
                       {"original_max_position_embeddings",
                        absl::StrCat(m.rope_scaling_original_max_position_embeddings())},
                       {"rope_type", "\"llama3\""}});
}

// The number of leading full-attention layers when the rest slide, else -1.
int64_t FullPrefix(const std::vector<int64_t>& windows) {
  int64_t first = 0;
  while (first < static_cast<int64_t>(windows.size()) && windows[first] < 0) ++first;
  for (size_t l = first; l < windows.size(); ++l) {
    if (windows[l] != windows[first]) return -1;
  }
  return first;
}

}  // namespace

std::string ApplyRopeScalingJson(const Json& hf, const HfArchitecture& arch,
                                 ModelFlagsFromFile* flags) {
  std::string type = "default";
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    const Json& scaling = MemberOrNull(hf, key);
    for (const auto& [name, value] : scaling.items()) {  // empty unless an object
      if (value.is_object()) {                           // transformers 5 nests them by layer type
        flags->Unsupported(absl::StrCat(key, " per layer type (\"", name,
                                        "\": {...}) is not implemented: Conveyor's layers share "
                                        "one RoPE"));
      }
    }
    if (!scaling.is_object() || ScalingType(scaling) == "default" || type != "default") continue;
    type = ScalingType(scaling);
    if (type == "llama3") {
      ApplyLlama3(scaling, key, flags);
    } else if (type == "yarn") {
      ApplyYarn(hf, arch, scaling, key, flags);
    } else {
      flags->Unsupported(absl::StrCat(key, " of type \"", type,
                                      "\" is not implemented: Conveyor's RoPE is unscaled "
                                      "(\"default\"), Llama 3.1's (\"llama3\") or YaRN's "
                                      "(\"yarn\")"));
    }
  }
  return type == "yarn" ? "yarn" : "rope";
}

void ApplySlidingWindowJson(const Json& hf, const HfArchitecture& arch, int64_t seq_length,
                            ModelFlagsFromFile* flags) {
  const Json window = HfFieldOrDefault(hf, arch, "sliding_window");
  const std::vector<bool> slides = SlidingLayersOf(hf, arch, flags);
  bool any = false, all = true;
  for (const bool s : slides) {
    any = any || s;
    all = all && s;
  }
  if (!any || !window.is_number() || AsInt64(window) >= seq_length) return;
  if (AsInt64(window) < 1) {
    flags->Unsupported(absl::StrCat("sliding_window = ", AsInt64(window),
                                    " leaves a query no key: it must be at least 1"));
    return;
  }
  if (arch.moe && !(std::string(arch.model_type) == "mixtral")) {
    flags->Unsupported(absl::StrCat("sliding_window = ", AsInt64(window), " in ", arch.class_name,
                                    ": its layers' windows are not read here; a window of at "
                                    "least --seq-length ",
                                    seq_length, " is plain causal attention"));
    return;
  }
  // Hugging Face's window W holds the query and the W - 1 keys before it.
  flags->String("window_size", "sliding_window", absl::StrCat(AsInt64(window) - 1, ",0"));
  if (!all) {
    flags->String("window_attn_skip_freq",
                  MemberOrNull(hf, "layer_types").is_array() ? "layer_types" : "max_window_layers",
                  LayerList(slides));
  }
}

absl::Status CheckPositionsExportable(const Config& config, const HfArchitecture& arch) {
  const ModelConfig& m = config.model();
  const std::vector<int64_t> windows = LayerWindowsFromConfig(m);
  const std::string model_type = arch.model_type;
  std::vector<std::string> problems;
  if (!windows.empty()) {
    const int64_t prefix = FullPrefix(windows);
    const bool mistral = model_type == "mistral" || model_type == "mixtral";
    const bool qwen = (arch.qkv_bias || arch.qk_norm) && !arch.moe;
    if (!mistral && !qwen) {
      problems.push_back(absl::StrCat("--window-size ", m.window_size(), ": ", arch.class_name,
                                      " has no sliding window; export as MistralForCausalLM"));
    } else if (prefix < 0 || (mistral && prefix != 0)) {
      problems.push_back(absl::StrCat(
          "--window-attn-skip-freq ", m.window_attn_skip_freq(), ": ", arch.class_name,
          mistral ? " slides every layer" : " slides the layers from max_window_layers on",
          "; this pattern cannot be written"));
    }
  }
  if (m.position_embedding_type() == "yarn") {
    const double positions = m.rotary_scaling_factor() * m.yarn_original_max_position_embeddings();
    if (positions != std::floor(positions)) {
      problems.push_back(absl::StrCat(
          "--rotary-scaling-factor ", m.rotary_scaling_factor(), " times ",
          "--yarn-original-max-position-embeddings is not a whole number of positions: "
          "transformers 4 reads YaRN's factor as max_position_embeddings over the original"));
    }
  }
  if (problems.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "config.json cannot describe the model's attention:\n  ", absl::StrJoin(problems, "\n  ")));
}

void AddPositionsConfigJsonFields(const ModelConfig& m, const HfArchitecture& arch,
                                  std::map<std::string, std::string>* fields) {
  (*fields)["rope_scaling"] = RopeScalingObject(m);
  if (m.position_embedding_type() == "yarn") {
    (*fields)["max_position_embeddings"] = absl::StrCat(static_cast<int64_t>(
        m.rotary_scaling_factor() * m.yarn_original_max_position_embeddings()));
  }
  const std::vector<int64_t> windows = LayerWindowsFromConfig(m);
  if (windows.empty()) return;
  const int64_t prefix = FullPrefix(windows);
  (*fields)["sliding_window"] = absl::StrCat(windows.back() + 1);
  if (arch.qkv_bias || arch.qk_norm) {
    (*fields)["use_sliding_window"] = "true";
    (*fields)["max_window_layers"] = absl::StrCat(prefix);
  }
}

}  // namespace conveyor
