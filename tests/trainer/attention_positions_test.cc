// The flags of RoPE's scalings and sliding windows (trainer/config/attention_positions.h), as a
// Megatron command line gives them: each rule's message names its flag, and the model
// reads Megatron's meaning (--window-attn-skip-freq N: every N-th layer, 1-based, is full
// attention; a list: 1 slides).
#include "trainer/config/attention_positions.h"

#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "trainer/config/config_validation.h"
#include "trainer/config/flags.h"

namespace conveyor {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

// The problems of a small CPU config with `flags` added.
std::string ProblemsOf(std::vector<std::string> flags) {
  flags.insert(flags.end(), {"--mock-data", "--vocab-size", "64", "--num-layers", "4",
                             "--hidden-size", "32", "--num-attention-heads", "4"});
  const absl::StatusOr<Config> config = ParseFlags(flags);
  if (!config.ok()) return std::string(config.status().message());
  return absl::StrJoin(ValidateConfig(*config, 1), "\n");
}

ModelConfig Model(std::vector<std::string> flags) {
  flags.insert(flags.end(), {"--num-layers", "4"});
  const absl::StatusOr<Config> config = ParseFlags(flags);
  EXPECT_TRUE(config.ok()) << config.status();
  return config.ok() ? config->model() : ModelConfig();
}

TEST(AttentionPositionsTest, MegatronCommandLinesAreValid) {
  EXPECT_EQ(ProblemsOf({"--position-embedding-type", "rope", "--use-rope-scaling",
                        "--rope-scaling-factor", "32"}),
            "");
  EXPECT_EQ(ProblemsOf({"--position-embedding-type", "yarn", "--rotary-scaling-factor", "40",
                        "--mscale", "0.707", "--mscale-all-dim", "0.707",
                        "--yarn-original-max-position-embeddings", "4096"}),
            "");
  EXPECT_EQ(ProblemsOf({"--window-size", "127,0", "--window-attn-skip-freq", "2"}), "");
  EXPECT_EQ(ProblemsOf({"--window-size", "(4095,0)", "--window-attn-skip-freq", "[1,1,1,0]"}), "");
}

TEST(AttentionPositionsTest, RulesNameTheirFlag) {
  EXPECT_THAT(ProblemsOf({"--use-rope-scaling"}),
              HasSubstr("--use-rope-scaling scales RoPE's frequencies (Llama 3.1) but "
                        "--position-embedding-type is learned_absolute"));
  EXPECT_THAT(ProblemsOf({"--position-embedding-type", "yarn", "--use-rope-scaling"}),
              HasSubstr("(which scales by --rotary-scaling-factor)"));
  EXPECT_THAT(ProblemsOf({"--position-embedding-type", "rope", "--use-rope-scaling",
                          "--rope-scaling-low-freq-factor", "4"}),
              HasSubstr("must satisfy 0 < low < high"));
  EXPECT_THAT(ProblemsOf({"--position-embedding-type", "yarn", "--rotary-percent", "0.5"}),
              HasSubstr("--rotary-percent 0.5 with --position-embedding-type yarn"));
  EXPECT_THAT(ProblemsOf({"--position-embedding-type", "yarn", "--yarn-beta-slow", "0"}),
              HasSubstr("--yarn-beta-slow 0 must be a positive number"));
  EXPECT_THAT(ProblemsOf({"--window-size", "128"}),
              HasSubstr("--window-size '128' is not a window"));
  EXPECT_THAT(ProblemsOf({"--window-size", "128,128"}),
              HasSubstr("give the right side as 0 (--window-size 128,0)"));
  EXPECT_THAT(ProblemsOf({"--window-attn-skip-freq", "2"}), HasSubstr("no --window-size is given"));
  EXPECT_THAT(ProblemsOf({"--window-size", "8,0", "--window-attn-skip-freq", "[1,0]"}),
              HasSubstr("gives 2 layers but --num-layers is 4"));
  EXPECT_THAT(ProblemsOf({"--window-size", "8,0", "--window-attn-skip-freq", "[1,2,1,0]"}),
              HasSubstr("entries are 1 (sliding window) or 0 (full attention), not 2"));
  EXPECT_THAT(ProblemsOf({"--window-size", "8,0", "--device", "cuda"}),
              HasSubstr("have never run on a GPU"));
}

// Megatron's is_layer_window_attention: layer_number (1-based) % N != 0 slides.
TEST(AttentionPositionsTest, LayerWindowsFollowMegatron) {
  EXPECT_THAT(LayerWindowsFromConfig(Model({})), IsEmpty());
  EXPECT_THAT(LayerWindowsFromConfig(Model({"--window-size", "-1,0"})), IsEmpty());
  EXPECT_EQ(LayerWindowsFromConfig(Model({"--window-size", "127,0"})),
            (std::vector<int64_t>{127, 127, 127, 127}));
  EXPECT_EQ(
      LayerWindowsFromConfig(Model({"--window-size", "127,0", "--window-attn-skip-freq", "2"})),
      (std::vector<int64_t>{127, -1, 127, -1}));
  EXPECT_EQ(LayerWindowsFromConfig(
                Model({"--window-size", "5,0", "--window-attn-skip-freq", "[0]*2+[1]*2"})),
            (std::vector<int64_t>{-1, -1, 5, 5}));
}

TEST(AttentionPositionsTest, ScalingFromFlags) {
  const RopeScaling llama3 =
      RopeScalingFromConfig(Model({"--position-embedding-type", "rope", "--use-rope-scaling"}),
                            PositionEmbeddingType::kRope);
  EXPECT_EQ(llama3.kind, RopeScalingKind::kLlama3);
  EXPECT_EQ(llama3.factor, 8.0);  // Megatron's default --rope-scaling-factor
  EXPECT_EQ(llama3.low_freq_factor, 1.0);
  EXPECT_EQ(llama3.high_freq_factor, 4.0);
  EXPECT_EQ(llama3.original_max_positions, 8192);
  const RopeScaling yarn = RopeScalingFromConfig(
      Model({"--position-embedding-type", "yarn", "--rotary-scaling-factor", "40"}),
      PositionEmbeddingType::kYarn);
  EXPECT_EQ(yarn.kind, RopeScalingKind::kYarn);
  EXPECT_EQ(yarn.factor, 40.0);
  EXPECT_EQ(yarn.original_max_positions, 4096);  // Megatron's YaRN defaults
  EXPECT_EQ(yarn.beta_fast, 32.0);
  EXPECT_EQ(yarn.beta_slow, 1.0);
  EXPECT_EQ(yarn.mscale, 1.0);
  EXPECT_EQ(yarn.mscale_all_dim, 0.0);
  EXPECT_TRUE(yarn.round_to_int);
  // Without --use-rope-scaling (or yarn) Megatron reads no scaling flag.
  EXPECT_EQ(RopeScalingFromConfig(
                Model({"--position-embedding-type", "rope", "--rotary-scaling-factor", "40"}),
                PositionEmbeddingType::kRope)
                .kind,
            RopeScalingKind::kNone);
}

}  // namespace
}  // namespace conveyor
