// config.json's RoPE scaling and sliding window written by an export and read back by
// --load-hf (trainer/hf/positions_config_json.h): every flag survives the round trip,
// and the fields are the ones transformers reads (rope_scaling's rope_type and numbers,
// sliding_window = Megatron's left + 1, use_sliding_window and max_window_layers).
#include "trainer/hf/positions_config_json.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "data/python_json.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "trainer/config/config_validation.h"
#include "trainer/config/flags.h"
#include "trainer/hf/hf_architecture.h"
#include "trainer/hf/llama_config_json.h"

namespace conveyor {
namespace {

using ::testing::HasSubstr;

const HfArchitecture& Named(const std::string& class_name) {
  for (const HfArchitecture& a : HfArchitectures()) {
    if (class_name == a.class_name) return a;
  }
  return HfArchitectures().front();
}

// A resolved Llama-family config of 4 layers with `flags` added.
Config Llama(std::vector<std::string> flags) {
  flags.insert(flags.end(),
               {"--mock-data", "--vocab-size", "64", "--num-layers", "4", "--hidden-size", "32",
                "--num-attention-heads", "4", "--seq-length", "256", "--normalization", "RMSNorm",
                "--swiglu", "--disable-bias-linear", "--untie-embeddings-and-output-weights"});
  if (std::find(flags.begin(), flags.end(), "--position-embedding-type") == flags.end()) {
    flags.insert(flags.end(), {"--position-embedding-type", "rope"});
  }
  absl::StatusOr<Config> parsed = ParseFlags(flags);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  absl::StatusOr<Config> resolved = ResolveConfig(*parsed, 1);
  EXPECT_TRUE(resolved.ok()) << resolved.status();
  return resolved.ok() ? *resolved : Config();
}

// Exports `config` as `arch`, reads the file back into a config given only
// --seq-length, and returns both the JSON and what it read.
struct RoundTrip {
  Json json;
  absl::Status read;
  ModelConfig model;
};
RoundTrip Trip(const Config& config, const HfArchitecture& arch) {
  RoundTrip trip;
  const absl::StatusOr<Json> json = ParseJson(LlamaConfigJson(config, arch, {}));
  EXPECT_TRUE(json.ok()) << json.status();
  trip.json = *json;
  Config back;
  back.mutable_model()->set_seq_length(config.model().seq_length());
  trip.read = ApplyLlamaConfigJson(trip.json, "config.json", arch, &back);
  trip.model = back.model();
  return trip;
}

TEST(PositionsConfigJsonTest, Llama3RoundTrip) {
  const Config config = Llama({"--use-rope-scaling", "--rope-scaling-factor", "32"});
  ASSERT_TRUE(CheckPositionsExportable(config, Named("LlamaForCausalLM")).ok());
  const RoundTrip trip = Trip(config, Named("LlamaForCausalLM"));
  ASSERT_TRUE(trip.read.ok()) << trip.read;
  const Json& scaling = trip.json["rope_scaling"];
  EXPECT_EQ(scaling["rope_type"], "llama3");
  EXPECT_EQ(scaling["factor"], 32.0);
  EXPECT_EQ(scaling["low_freq_factor"], 1.0);
  EXPECT_EQ(scaling["high_freq_factor"], 4.0);
  EXPECT_EQ(scaling["original_max_position_embeddings"], 8192);
  EXPECT_TRUE(trip.model.use_rope_scaling());
  EXPECT_EQ(trip.model.rope_scaling_factor(), 32.0f);
  EXPECT_EQ(trip.model.position_embedding_type(), "rope");
}

TEST(PositionsConfigJsonTest, YarnRoundTrip) {
  const Config config = Llama({"--position-embedding-type", "yarn", "--rotary-scaling-factor", "4",
                               "--mscale", "0.707", "--mscale-all-dim", "0.5",
                               "--yarn-original-max-position-embeddings", "1024"});
  const HfArchitecture& arch = Named("Qwen3ForCausalLM");
  const Config qwen3 = [&] {
    Config c = config;
    c.mutable_model()->set_qk_layernorm(true);
    return c;
  }();
  const RoundTrip trip = Trip(qwen3, arch);
  ASSERT_TRUE(trip.read.ok()) << trip.read;
  const Json& scaling = trip.json["rope_scaling"];
  EXPECT_EQ(scaling["rope_type"], "yarn");
  EXPECT_EQ(trip.json["max_position_embeddings"], 4096);  // factor x original context
  EXPECT_NEAR(scaling["attention_factor"].get<double>(),
              (0.1 * 0.707 * std::log(4.0) + 1) / (0.1 * 0.5 * std::log(4.0) + 1), 1e-6);
  EXPECT_EQ(trip.model.position_embedding_type(), "yarn");
  EXPECT_EQ(trip.model.rotary_scaling_factor(), 4.0f);
  EXPECT_EQ(trip.model.yarn_original_max_position_embeddings(), 1024);
  EXPECT_EQ(trip.model.mscale(), 0.707f);
  EXPECT_EQ(trip.model.mscale_all_dim(), 0.5f);
}

TEST(PositionsConfigJsonTest, SlidingWindowRoundTrip) {
  const Config mistral = Llama({"--window-size", "127,0"});
  EXPECT_EQ(HfArchitectureForExport(mistral, "").value()->class_name,
            std::string("MistralForCausalLM"));
  const RoundTrip all = Trip(mistral, Named("MistralForCausalLM"));
  ASSERT_TRUE(all.read.ok()) << all.read;
  EXPECT_EQ(all.json["sliding_window"], 128);  // the query and the 127 keys before it
  EXPECT_EQ(all.model.window_size(), "127,0");
  EXPECT_EQ(all.model.window_attn_skip_freq(), "");

  Config qwen = Llama({"--window-size", "63,0", "--window-attn-skip-freq", "[0,1,1,1]"});
  qwen.mutable_model()->set_add_qkv_bias(true);
  const RoundTrip later = Trip(qwen, Named("Qwen2ForCausalLM"));
  ASSERT_TRUE(later.read.ok()) << later.read;
  EXPECT_EQ(later.json["use_sliding_window"], true);
  EXPECT_EQ(later.json["max_window_layers"], 1);
  EXPECT_EQ(later.json["sliding_window"], 64);
  EXPECT_EQ(later.model.window_size(), "63,0");
  EXPECT_EQ(later.model.window_attn_skip_freq(), "[0,1,1,1]");
}

TEST(PositionsConfigJsonTest, WhatAClassCannotSayIsRefused) {
  const Config windowed = Llama({"--window-size", "127,0", "--window-attn-skip-freq", "2"});
  EXPECT_THAT(CheckPositionsExportable(windowed, Named("LlamaForCausalLM")).message(),
              HasSubstr("LlamaForCausalLM has no sliding window"));
  EXPECT_THAT(CheckPositionsExportable(windowed, Named("MistralForCausalLM")).message(),
              HasSubstr("MistralForCausalLM slides every layer"));
  Config qwen = windowed;
  qwen.mutable_model()->set_add_qkv_bias(true);
  EXPECT_THAT(CheckPositionsExportable(qwen, Named("Qwen2ForCausalLM")).message(),
              HasSubstr("slides the layers from max_window_layers on"));
  const Config yarn = Llama({"--position-embedding-type", "yarn", "--rotary-scaling-factor", "1.5",
                             "--yarn-original-max-position-embeddings", "1001"});
  EXPECT_THAT(CheckPositionsExportable(yarn, Named("LlamaForCausalLM")).message(),
              HasSubstr("not a whole number of positions"));
}

}  // namespace
}  // namespace conveyor
