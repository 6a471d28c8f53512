#include "trainer/hf/gpt2_config_json.h"

#include <cmath>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "trainer/hf/json_text.h"

namespace conveyor {

std::string Gpt2ConfigJson(const Config& config, const Gpt2Dims& dims,
                           const std::string& torch_dtype) {
  const ModelConfig& m = config.model();
  const int64_t last_token = dims.vocab - 1;
  // One field per line, in a fixed order, so that diffs of exported models read well.
  const std::vector<std::pair<std::string, std::string>> fields = {
      {"architectures", "[\"GPT2LMHeadModel\"]"},
      {"model_type", "\"gpt2\""},
      {"vocab_size", absl::StrCat(dims.vocab)},
      {"n_positions", absl::StrCat(dims.positions)},
      {"n_ctx", absl::StrCat(dims.positions)},
      {"n_embd", absl::StrCat(dims.hidden)},
      {"n_layer", absl::StrCat(dims.num_layers)},
      {"n_head", absl::StrCat(dims.heads)},
      {"n_inner", "null"},  // null means 4 * n_embd, which CheckGpt2Architecture ensures
      {"activation_function", "\"gelu_new\""},
      {"layer_norm_epsilon", JsonFloat(m.norm_epsilon())},
      {"initializer_range", JsonFloat(m.init_method_std())},
      {"resid_pdrop", JsonFloat(m.hidden_dropout())},
      {"embd_pdrop", JsonFloat(m.hidden_dropout())},
      {"attn_pdrop", JsonFloat(m.attention_dropout())},
      {"scale_attn_weights", "true"},
      {"tie_word_embeddings", "true"},
      {"bos_token_id", absl::StrCat(last_token)},
      {"eos_token_id", absl::StrCat(last_token)},
      {"torch_dtype", JsonQuote(torch_dtype)},
  };
  std::string json = "{\n";
  for (size_t i = 0; i < fields.size(); ++i) {
    absl::StrAppend(&json, "  ", JsonQuote(fields[i].first), ": ", fields[i].second,
                    i + 1 < fields.size() ? ",\n" : "\n");
  }
  json += "}\n";
  return json;
}

namespace {

// GPT2Config.attribute_map: config.json may name a size by its generic name.
const Json& Gpt2Field(const Json& hf, const char* key) {
  static const auto* const kAliases = new std::map<std::string, std::string>{
      {"n_embd", "hidden_size"},
      {"n_layer", "num_hidden_layers"},
      {"n_head", "num_attention_heads"},
      {"n_positions", "max_position_embeddings"}};
  const auto alias = kAliases->find(key);
  return FindMember(hf, key) == nullptr && alias != kAliases->end()
             ? MemberOrNull(hf, alias->second)
             : MemberOrNull(hf, key);
}

}  // namespace

absl::Status CheckGpt2ConfigJson(const Json& hf, const std::string& path, const Config& config,
                                 const Gpt2Dims& dims) {
  if (!hf.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path, " is not a JSON object"));
  }
  std::vector<std::string> problems;
  // An integer field that must equal Conveyor's value (or, for positions, cover it).
  auto check_size = [&](const char* key, int64_t want, const char* flag, bool at_least) {
    const Json& v = Gpt2Field(hf, key);
    if (!v.is_number()) {
      problems.push_back(absl::StrCat(key, " is missing or not a number"));
    } else if (at_least ? AsInt64(v) < want : AsInt64(v) != want) {
      problems.push_back(absl::StrCat(key, " is ", AsInt64(v), " but ", flag, " is ", want,
                                      at_least ? " (the HF table must be at least as long)" : ""));
    }
  };
  check_size("n_layer", dims.num_layers, "--num-layers", false);
  check_size("n_embd", dims.hidden, "--hidden-size", false);
  check_size("n_head", dims.heads, "--num-attention-heads", false);
  check_size("vocab_size", dims.vocab, "--vocab-size (the tokenizer's)", false);
  check_size("n_positions", dims.positions, "--max-position-embeddings", true);
  const Json& inner = MemberOrNull(hf, "n_inner");
  if (!inner.is_null() && (!inner.is_number() || AsInt64(inner) != 4 * dims.hidden)) {
    problems.push_back(absl::StrCat("n_inner is ", AsInt64(inner),
                                    "; Conveyor's GPT-2 MLP is 4 * n_embd = ", 4 * dims.hidden));
  }
  // Absent, transformers' default (GPT2Config.layer_norm_epsilon).
  const double epsilon = MemberOrNull(hf, "layer_norm_epsilon").is_number()
                             ? AsDouble(MemberOrNull(hf, "layer_norm_epsilon"))
                             : 1e-5;
  if (std::fabs(epsilon - config.model().norm_epsilon()) > 1e-6 * std::fabs(epsilon)) {
    problems.push_back(absl::StrCat("layer_norm_epsilon is ", epsilon,
                                    FindMember(hf, "layer_norm_epsilon") == nullptr
                                        ? " (absent: GPT2Config's default)"
                                        : "",
                                    " but --norm-epsilon is ",
                                    JsonFloat(config.model().norm_epsilon())));
  }
  if (problems.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(path, " does not match the configured model:\n  ",
                                                 absl::StrJoin(problems, "\n  ")));
}

}  // namespace conveyor
