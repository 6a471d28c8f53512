// config.json against the field tables (trainer/hf/hf_config_fields.h): every field
// that changes the model in a way Conveyor does not compute is refused by name, values
// of the wrong type and absurd sizes are refused naming the file and key, absent fields
// take transformers' defaults of their architecture, unknown fields are named in one
// warning, and docs/hf_config_fields.md is the tables rendered.
#include "trainer/hf/hf_config_fields.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/atomic_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/util/test_dirs.h"
#include "trainer/checkpoint/file_io.h"
#include "trainer/config/flags.h"
#include "trainer/hf/export.h"
#include "trainer/hf/gpt2_config_json.h"
#include "trainer/hf/hf_architecture.h"
#include "trainer/hf/hf_folder.h"

namespace conveyor {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using testing_util::FreshDir;

// A valid config.json body of each model_type (tiny sizes); `extra` is appended.
std::string ConfigJson(const HfArchitecture& arch, const std::string& extra = "") {
  const std::string head = absl::StrCat("{\"architectures\": [\"", arch.class_name,
                                        "\"], \"model_type\": \"", arch.model_type, "\"");
  const std::string sizes =
      arch.family == HfFamily::kGpt2
          ? ", \"n_layer\": 2, \"n_embd\": 64, \"n_head\": 4, \"vocab_size\": 256, "
            "\"n_positions\": 64"
          : ", \"num_hidden_layers\": 2, \"hidden_size\": 64, \"intermediate_size\": 128, "
            "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"head_dim\": 16, "
            "\"vocab_size\": 256";
  return absl::StrCat(head, sizes, extra.empty() ? "" : ", ", extra, "}");
}

// A folder holding only config.json: ApplyHfConfig reads nothing else.
std::string Folder(const std::string& json, const std::string& name) {
  const std::string dir = FreshDir(name);
  const std::string path = JoinPath(dir, kHfConfigFile);
  EXPECT_TRUE(WriteFileAtomically(path, json, path + ".tmp", Durability::kVisible).ok());
  return dir;
}

// ApplyHfConfig on `json` with `flags` parsed first, as the trainer does.
absl::StatusOr<Config> Apply(const std::string& json, const std::string& name,
                             std::vector<std::string> flags = {},
                             std::vector<std::string>* warnings = nullptr) {
  const std::string dir = Folder(json, name);
  flags.insert(flags.begin(), {"--load-hf", dir, "--mock-data"});
  absl::StatusOr<Config> config = ParseFlags(flags);
  if (!config.ok()) return config.status();
  if (absl::Status s = ApplyHfConfig(dir, &*config, warnings); !s.ok()) return s;
  return config;
}

const HfArchitecture& Arch(const std::string& model_type) {
  for (const HfArchitecture& a : HfArchitectures()) {
    if (model_type == a.model_type) return a;
  }
  return HfArchitectures().front();
}

// A value of `field`'s type that is none of the values Conveyor supports.
std::string UnsupportedValue(const HfConfigField& field) {
  switch (field.type) {
    case HfJsonType::kBool:
      return field.allowed[0] == "true" ? "false" : "true";
    case HfJsonType::kString:
      return "\"something_else\"";
    case HfJsonType::kObjectOrNull:
      return "{\"bits\": 4}";
    default:
      return "12345";
  }
}

// The two GPT-2 fields: transformers scales the scores differently, so the loss
// would differ from its by 3e-4 and 3e-3; Conveyor refuses them by name.
TEST(HfConfigFieldsTest, Gpt2AttentionScalingIsRefusedByName) {
  const absl::StatusOr<Config> config =
      Apply(ConfigJson(Arch("gpt2"),
                       "\"scale_attn_weights\": false, \"scale_attn_by_inverse_layer_idx\": true"),
            "gpt2_scaling");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(config.status().message(),
              AllOf(HasSubstr("config.json"),
                    HasSubstr("scale_attn_weights = false is not supported: Conveyor supports "
                              "true"),
                    HasSubstr("scale_attn_by_inverse_layer_idx = true is not supported: "
                              "Conveyor supports false")));
  // transformers' defaults, written out, are fine.
  EXPECT_TRUE(Apply(ConfigJson(Arch("gpt2"),
                               "\"scale_attn_weights\": true, "
                               "\"scale_attn_by_inverse_layer_idx\": false"),
                    "gpt2_scaling_defaults")
                  .ok());
}

// Every field a table refuses unless it holds a supported value, in every architecture.
TEST(HfConfigFieldsTest, EveryRefusedFieldIsNamedWithItsValue) {
  for (const HfArchitecture& arch : HfArchitectures()) {
    for (const HfConfigField& field : HfConfigFields(arch)) {
      if (field.use != HfFieldUse::kRefusedUnlessAllowed) continue;
      const std::string value = UnsupportedValue(field);
      const absl::StatusOr<Config> config =
          Apply(ConfigJson(arch, absl::StrCat("\"", field.key, "\": ", value)), "refused");
      ASSERT_FALSE(config.ok()) << arch.class_name << " " << field.key;
      EXPECT_THAT(config.status().message(),
                  HasSubstr(absl::StrCat(field.key, " = ", value, " is not supported")))
          << arch.class_name;
    }
  }
}

TEST(HfConfigFieldsTest, WrongTypesNameTheFileKeyValueAndType) {
  for (const std::string value : {"\"64\"", "64.5", "null", "true"}) {
    std::string json = ConfigJson(Arch("llama"));
    json.replace(json.find("\"hidden_size\": 64"), 17, "\"hidden_size\": " + value);
    const absl::StatusOr<Config> config = Apply(json, "wrong_type");
    ASSERT_FALSE(config.ok()) << value;
    EXPECT_THAT(config.status().message(),
                AllOf(HasSubstr("config.json"),
                      HasSubstr(absl::StrCat("hidden_size = ", value,
                                             " has the wrong type: expected an integer"))));
  }
  const absl::StatusOr<Config> gpt2 =
      Apply(ConfigJson(Arch("gpt2"), "\"layer_norm_epsilon\": \"1e-5\""), "wrong_type_gpt2");
  EXPECT_THAT(gpt2.status().message(),
              HasSubstr("layer_norm_epsilon = \"1e-5\" has the wrong type: expected a finite "
                        "number"));
  // 64.0 is the integer 64, as Python reads it.
  std::string json = ConfigJson(Arch("llama"));
  json.replace(json.find("\"hidden_size\": 64"), 17, "\"hidden_size\": 64.0");
  const absl::StatusOr<Config> config = Apply(json, "integral_float");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->model().hidden_size(), 64);
}

// Each size of each table, one past the limit its flag has (trainer/config/size_limits.h), past
// what an int32 flag holds, and zero.
TEST(HfConfigFieldsTest, AbsurdSizesAreRefusedByKeyBeforeAnythingIsBuilt) {
  for (const HfArchitecture& arch : HfArchitectures()) {
    for (const HfConfigField& field : HfConfigFields(arch)) {
      if (field.limit == nullptr) continue;
      for (const int64_t value : {field.limit->max + 1, int64_t{1} << 40}) {
        const absl::StatusOr<Config> config =
            Apply(ConfigJson(arch, absl::StrCat("\"", field.key, "\": ", value)), "absurd");
        ASSERT_FALSE(config.ok()) << arch.class_name << " " << field.key << " " << value;
        EXPECT_THAT(
            config.status().message(),
            HasSubstr(absl::StrCat(field.key, " = ", value, " is more than ", field.limit->max,
                                   ", the largest Conveyor accepts (", field.limit->why, ")")));
      }
      const absl::StatusOr<Config> zero =
          Apply(ConfigJson(arch, absl::StrCat("\"", field.key, "\": 0")), "zero");
      EXPECT_THAT(zero.status().message(),
                  HasSubstr(absl::StrCat(field.key, " = 0 is not a size: it must be at least 1")));
    }
  }
  const absl::StatusOr<Config> layers =
      Apply(ConfigJson(Arch("qwen2"), "\"num_hidden_layers\": 100000000"), "layers");
  EXPECT_THAT(layers.status().message(),
              HasSubstr("num_hidden_layers = 100000000 is more than 16384, the largest Conveyor "
                        "accepts (each layer is built as its own objects)"));
  const absl::StatusOr<Config> beyond_int64 =
      Apply(ConfigJson(Arch("llama"), "\"vocab_size\": 1e30"), "beyond_int64");
  EXPECT_THAT(beyond_int64.status().message(),
              HasSubstr("vocab_size = 1e+30 is more than 16777216, the largest Conveyor accepts"));
}

// The case: a Llama config naming GPT2LMHeadModel ended in "--vocab-size 0".
TEST(HfConfigFieldsTest, ArchitecturesAndModelTypeMustAgree) {
  std::string json = ConfigJson(Arch("llama"));
  json.replace(json.find("LlamaForCausalLM"), 16, "GPT2LMHeadModel");
  const absl::StatusOr<Config> config = Apply(json, "disagree");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(),
              AllOf(HasSubstr("config.json names architectures [\"GPT2LMHeadModel\"] but "
                              "model_type \"llama\""),
                    HasSubstr("GPT2LMHeadModel is model_type \"gpt2\"")));
  // Without model_type the class decides: hidden_size and the like are GPT2Config's
  // aliases, but GPT-2's position table is missing.
  json.replace(json.find(", \"model_type\": \"llama\""), 23, "");
  const absl::StatusOr<Config> untyped = Apply(json, "untyped");
  ASSERT_FALSE(untyped.ok());
  EXPECT_THAT(untyped.status().message(),
              AllOf(HasSubstr("n_positions is missing: a GPT2LMHeadModel config must give it"),
                    Not(HasSubstr("n_embd is missing"))));
  EXPECT_THAT(Apply("{\"architectures\": \"LlamaForCausalLM\"}", "not_a_list").status().message(),
              HasSubstr("architectures must be a list of class names"));
}

TEST(HfConfigFieldsTest, RequiredLlamaFieldsAreNamed) {
  const absl::StatusOr<Config> config =
      Apply("{\"model_type\": \"mistral\", \"hidden_size\": 64}", "required");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(),
              AllOf(HasSubstr("num_hidden_layers is missing: a MistralForCausalLM config must "
                              "give it"),
                    HasSubstr("vocab_size is missing"), Not(HasSubstr("hidden_size is missing"))));
}

// transformers' defaults differ per architecture; an absent field takes its own.
TEST(HfConfigFieldsTest, AbsentFieldsTakeTheArchitecturesDefaults) {
  const std::string sizes =
      "\"num_hidden_layers\": 2, \"hidden_size\": 512, \"intermediate_size\": 128, "
      "\"num_attention_heads\": 32, \"vocab_size\": 256";
  const absl::StatusOr<Config> mistral =
      Apply(absl::StrCat("{\"model_type\": \"mistral\", ", sizes, "}"), "mistral_defaults");
  ASSERT_TRUE(mistral.ok()) << mistral.status();
  EXPECT_EQ(mistral->model().num_query_groups(), 8);  // MistralConfig.num_key_value_heads
  EXPECT_EQ(mistral->model().kv_channels(), 16);      // hidden_size / num_attention_heads
  EXPECT_EQ(mistral->model().max_position_embeddings(), 131072);
  const absl::StatusOr<Config> qwen3 =
      Apply(absl::StrCat("{\"model_type\": \"qwen3\", ", sizes, "}"), "qwen3_defaults");
  ASSERT_TRUE(qwen3.ok()) << qwen3.status();
  EXPECT_EQ(qwen3->model().kv_channels(), 128);  // Qwen3Config.head_dim
  EXPECT_EQ(qwen3->model().num_query_groups(), 32);
  const absl::StatusOr<Config> llama =
      Apply(absl::StrCat("{\"model_type\": \"llama\", ", sizes, "}"), "llama_defaults");
  ASSERT_TRUE(llama.ok()) << llama.status();
  EXPECT_EQ(llama->model().num_query_groups(), 32);  // null: num_attention_heads
  EXPECT_EQ(llama->model().max_position_embeddings(), 2048);
}

TEST(HfConfigFieldsTest, RopeOtherThanDefaultLlama3OrYarnIsRefused) {
  const absl::StatusOr<Config> scaled = Apply(
      ConfigJson(Arch("llama"),
                 "\"rope_parameters\": {\"rope_type\": \"linear\", \"factor\": 4.0}"),
      "linear");
  EXPECT_THAT(scaled.status().message(),
              HasSubstr("rope_parameters of type \"linear\" is not implemented"));
  const absl::StatusOr<Config> nested =
      Apply(ConfigJson(Arch("qwen3"),
                       "\"rope_parameters\": {\"full_attention\": "
                       "{\"rope_type\": \"default\", \"rope_theta\": 5.0}}"),
            "nested");
  EXPECT_THAT(nested.status().message(),
              HasSubstr("rope_parameters per layer type (\"full_attention\": {...}) is not "
                        "implemented"));
  const absl::StatusOr<Config> plain =
      Apply(ConfigJson(Arch("qwen3"),
                       "\"rope_parameters\": {\"rope_type\": \"default\", "
                       "\"rope_theta\": 5.0}"),
            "plain");
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->model().rotary_base(), 5.0f);
}

// Sliding windows as transformers reads them: Mistral's (absent: 4096) on every layer,
// Qwen2's from max_window_layers on or where layer_types says, only with
// use_sliding_window; a window of W keys is Megatron's (W - 1, 0), and one at least
// --seq-length long is plain causal attention.
TEST(HfConfigFieldsTest, SlidingWindowsAreRead) {
  auto window = [](const std::string& model_type, const std::string& extra,
                   const std::string& name) {
    const absl::StatusOr<Config> c =
        Apply(ConfigJson(Arch(model_type), extra), name, {"--seq-length", "8192"});
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? std::pair(c->model().window_size(), c->model().window_attn_skip_freq())
                  : std::pair(std::string("error"), std::string());
  };
  using Window = std::pair<std::string, std::string>;
  EXPECT_EQ(window("mistral", "", "mistral_default"), Window("4095,0", ""));
  EXPECT_EQ(window("mistral", "\"sliding_window\": 8192", "mistral_long"), Window("", ""));
  EXPECT_EQ(window("mistral", "\"sliding_window\": null", "mistral_none"), Window("", ""));
  // Qwen2 slides from max_window_layers on only: 28 by default, past these 2 layers.
  EXPECT_EQ(window("qwen2", "\"use_sliding_window\": true", "qwen_default"), Window("", ""));
  EXPECT_EQ(window("qwen2", "\"use_sliding_window\": true, \"max_window_layers\": 1", "qwen_one"),
            Window("4095,0", "[0,1]"));
  EXPECT_EQ(window("qwen2", "\"use_sliding_window\": true, \"max_window_layers\": 0", "qwen_all"),
            Window("4095,0", ""));
  // Without use_sliding_window, Qwen2Config drops the window whatever layer_types says.
  const std::string kinds = "\"layer_types\": [\"sliding_attention\", \"full_attention\"]";
  EXPECT_EQ(window("qwen2", kinds, "qwen_kinds"), Window("", ""));
  EXPECT_EQ(window("qwen3", absl::StrCat(kinds, ", \"use_sliding_window\": true, "
                                               "\"sliding_window\": 100"),
                   "qwen_kinds_sliding"),
            Window("99,0", "[1,0]"));
  EXPECT_THAT(Apply(ConfigJson(Arch("qwen3"), "\"layer_types\": [\"chunked_attention\"]"),
                    "qwen_unknown_kind")
                  .status()
                  .message(),
              HasSubstr("layer_types holds \"chunked_attention\": Conveyor supports"));
  // A window flag that disagrees with the file is a contradiction.
  EXPECT_THAT(Apply(ConfigJson(Arch("mistral"), "\"sliding_window\": 100"), "contradiction",
                    {"--window-size", "50,0"})
                  .status()
                  .message(),
              HasSubstr("--window-size 50,0 contradicts sliding_window = 99,0"));
}

// rope_scaling of type llama3 sets Llama 3.1's flags; yarn sets YaRN's, with
// transformers' defaults (original context: max_position_embeddings; betas 32 and 1;
// mscale and mscale_all_dim only when both are nonzero) and its readings of factor.
TEST(HfConfigFieldsTest, RopeScalingLlama3AndYarnAreRead) {
  const absl::StatusOr<Config> llama3 = Apply(
      ConfigJson(Arch("llama"),
                 "\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 32.0, "
                 "\"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
                 "\"original_max_position_embeddings\": 8192}"),
      "llama3");
  ASSERT_TRUE(llama3.ok()) << llama3.status();
  EXPECT_EQ(llama3->model().position_embedding_type(), "rope");
  EXPECT_TRUE(llama3->model().use_rope_scaling());
  EXPECT_EQ(llama3->model().rope_scaling_factor(), 32.0f);
  EXPECT_EQ(llama3->model().rope_scaling_low_freq_factor(), 1.0f);
  EXPECT_EQ(llama3->model().rope_scaling_high_freq_factor(), 4.0f);
  EXPECT_EQ(llama3->model().rope_scaling_original_max_position_embeddings(), 8192);
  EXPECT_THAT(Apply(ConfigJson(Arch("llama"), "\"rope_scaling\": {\"rope_type\": \"llama3\", "
                                               "\"factor\": 8.0}"),
                    "llama3_partial")
                  .status()
                  .message(),
              HasSubstr("has no number low_freq_factor"));
  // DeepSeek-V3's: factor 40 = 163840 / 4096, mscale = mscale_all_dim = 1.
  const absl::StatusOr<Config> yarn = Apply(
      ConfigJson(Arch("qwen2"),
                 "\"max_position_embeddings\": 163840, \"rope_scaling\": {\"type\": \"yarn\", "
                 "\"factor\": 40, \"original_max_position_embeddings\": 4096, \"beta_fast\": 32, "
                 "\"beta_slow\": 1, \"mscale\": 1.0, \"mscale_all_dim\": 1.0}"),
      "yarn");
  ASSERT_TRUE(yarn.ok()) << yarn.status();
  EXPECT_EQ(yarn->model().position_embedding_type(), "yarn");
  EXPECT_EQ(yarn->model().rotary_scaling_factor(), 40.0f);
  EXPECT_EQ(yarn->model().yarn_original_max_position_embeddings(), 4096);
  EXPECT_EQ(yarn->model().mscale(), 1.0f);
  EXPECT_EQ(yarn->model().mscale_all_dim(), 1.0f);
  EXPECT_TRUE(yarn->model().yarn_correction_range_round_to_int());
  // Qwen's: factor 4 over the 32768 positions of max_position_embeddings; mscale alone
  // is not read (transformers uses 0.1 ln s + 1 then).
  const absl::StatusOr<Config> qwen = Apply(
      ConfigJson(Arch("qwen2"), "\"max_position_embeddings\": 32768, \"rope_scaling\": "
                                "{\"rope_type\": \"yarn\", \"factor\": 4.0, \"mscale\": 0.7, "
                                "\"truncate\": false}"),
      "yarn_qwen");
  ASSERT_TRUE(qwen.ok()) << qwen.status();
  EXPECT_EQ(qwen->model().yarn_original_max_position_embeddings(), 32768);
  EXPECT_EQ(qwen->model().mscale(), 1.0f);
  EXPECT_EQ(qwen->model().mscale_all_dim(), 0.0f);
  EXPECT_EQ(qwen->model().yarn_beta_fast(), 32.0f);
  EXPECT_FALSE(qwen->model().yarn_correction_range_round_to_int());
  const std::string ambiguous =
      "\"max_position_embeddings\": 8192, \"rope_scaling\": {\"rope_type\": \"yarn\", "
      "\"factor\": 4.0, \"original_max_position_embeddings\": 4096}";
  EXPECT_THAT(Apply(ConfigJson(Arch("qwen2"), ambiguous), "yarn_ambiguous").status().message(),
              HasSubstr("transformers 4 scales by the ratio, 5 by factor"));
  const std::string attention_factor =
      "\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0, \"attention_factor\": 1.0}";
  EXPECT_THAT(
      Apply(ConfigJson(Arch("qwen2"), attention_factor), "yarn_attention").status().message(),
      HasSubstr("attention_factor = 1.0 is not YaRN's concentration factor"));
}

// A GPT-2 folder alone configures the run (it ended in "--vocab-size 0"), unpadded so
// that no padding row adds a logit of 0 to the softmax; flags given stay (compared with
// the file when the weights are read).
TEST(HfConfigFieldsTest, Gpt2ConfigSetsTheFlagsNotGiven) {
  const absl::StatusOr<Config> config =
      Apply(ConfigJson(Arch("gpt2"), "\"layer_norm_epsilon\": 1e-6"), "gpt2_flags",
            {"--num-layers", "3"});
  ASSERT_TRUE(config.ok()) << config.status();
  const ModelConfig& m = config->model();
  EXPECT_EQ(m.num_layers(), 3);
  EXPECT_EQ(m.hidden_size(), 64);
  EXPECT_EQ(m.num_attention_heads(), 4);
  EXPECT_EQ(m.vocab_size(), 256);
  EXPECT_EQ(m.max_position_embeddings(), 64);
  EXPECT_EQ(m.norm_epsilon(), 1e-6f);
  EXPECT_EQ(m.make_vocab_size_divisible_by(), 1);
  const absl::StatusOr<Config> padded =
      Apply(ConfigJson(Arch("gpt2")), "gpt2_padded", {"--make-vocab-size-divisible-by", "128"});
  ASSERT_TRUE(padded.ok()) << padded.status();
  EXPECT_EQ(padded->model().make_vocab_size_divisible_by(), 128);
  EXPECT_EQ(padded->model().norm_epsilon(), 1e-5f);  // GPT2Config's default
}

TEST(HfConfigFieldsTest, Gpt2EpsilonAbsentIsTransformersDefault) {
  const Config config = [] {
    Config c;
    c.mutable_model()->set_norm_epsilon(1e-6f);
    return c;
  }();
  const absl::StatusOr<Json> json = ParseJson(ConfigJson(Arch("gpt2")));
  ASSERT_TRUE(json.ok());
  Gpt2Dims dims;
  dims.num_layers = 2, dims.hidden = 64, dims.heads = 4, dims.vocab = 256, dims.positions = 64;
  const absl::Status status = CheckGpt2ConfigJson(*json, "x/config.json", config, dims);
  EXPECT_THAT(status.message(),
              HasSubstr("layer_norm_epsilon is 1e-05 (absent: GPT2Config's default) but "
                        "--norm-epsilon is 1e-06"));
}

TEST(HfConfigFieldsTest, UnknownFieldsAreNamedInOneWarning) {
  std::vector<std::string> warnings;
  const absl::StatusOr<Config> config =
      Apply(ConfigJson(Arch("qwen2"), "\"my_scale\": 2.0, \"use_cache\": true, \"foo\": null"),
            "unknown", {}, &warnings);
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], AllOf(HasSubstr("config.json"), HasSubstr("my_scale, foo"),
                                 Not(HasSubstr("use_cache"))));
  warnings.clear();
  ASSERT_TRUE(Apply(ConfigJson(Arch("qwen2")), "known", {}, &warnings).ok());
  EXPECT_TRUE(warnings.empty());
}

TEST(HfConfigFieldsTest, TheDocIsTheTablesRendered) {
  const absl::StatusOr<std::string> doc = ReadSmallFile("docs/hf_config_fields.md");
  ASSERT_TRUE(doc.ok()) << doc.status();
  EXPECT_EQ(*doc, HfConfigFieldsMarkdown())
      << "regenerate docs/hf_config_fields.md: bazel run //tests/trainer/hf:hf_config_fields_doc";
}

}  // namespace
}  // namespace conveyor
