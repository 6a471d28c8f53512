// The model flags Megatron recipes use added for them: --rotary-percent,
// --add-qkv-bias and --position-embedding-type none, from the command line to the
// model's parameters (their math is checked in tests/model: partial_rotary_test and
// the grad tests' partial_rope_qkv_bias and no_positions variants).
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/gpt_model.h"
#include "model/model_shape.h"
#include "runtime/cpu/cpu_ops.h"
#include "trainer/config/flags.h"
#include "trainer/config/resolved_config.h"

namespace conveyor {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

absl::StatusOr<ResolvedConfig> Resolve(std::vector<std::string> args) {
  args.insert(args.end(),
              {"--mock-data", "--vocab-size", "64", "--num-layers", "1", "--hidden-size", "32",
               "--num-attention-heads", "4", "--seq-length", "16"});
  const absl::StatusOr<Config> parsed = ParseFlags(args);
  if (!parsed.ok()) return parsed.status();
  return ResolvedConfig::Resolve(*parsed, 1);
}

std::set<std::string> ParameterNames(const ResolvedConfig& config) {
  const TensorParallel one_rank;
  GptModel model(&CpuOps::Get(), config.model_shape(), 1, &one_rank);
  std::set<std::string> names;
  for (const Parameter* p : model.parameters().parameters()) names.insert(p->name);
  return names;
}

TEST(RecipeFlagsTest, RotaryPercentSetsTheRotatedChannels) {
  const absl::StatusOr<ResolvedConfig> half =
      Resolve({"--position-embedding-type", "rope", "--rotary-percent", "0.5"});
  ASSERT_TRUE(half.ok()) << half.status();
  // Head dimension 32 / 4 = 8: Megatron's int(8 * 0.5) = 4 channels rotate.
  EXPECT_EQ(half->model_shape().rotary_dims(), 4);

  const absl::StatusOr<ResolvedConfig> odd =
      Resolve({"--position-embedding-type", "rope", "--rotary-percent", "0.375"});
  ASSERT_FALSE(odd.ok());
  EXPECT_THAT(odd.status().message(),
              HasSubstr("--rotary-percent 0.375 of --kv-channels 8 rotates 3 channels"));
  const absl::StatusOr<ResolvedConfig> zero =
      Resolve({"--position-embedding-type", "rope", "--rotary-percent", "0"});
  ASSERT_FALSE(zero.ok());
  EXPECT_THAT(zero.status().message(), HasSubstr("--rotary-percent 0 must be in (0, 1]"));
}

TEST(RecipeFlagsTest, AddQkvBiasGivesOnlyTheQkvProjectionABias) {
  const absl::StatusOr<ResolvedConfig> qwen = Resolve({"--disable-bias-linear", "--add-qkv-bias"});
  ASSERT_TRUE(qwen.ok()) << qwen.status();
  const std::set<std::string> names = ParameterNames(*qwen);
  EXPECT_THAT(names, Contains("layers.0.attention.qkv.bias"));
  EXPECT_THAT(
      names, AllOf(Not(Contains("layers.0.attention.proj.bias")),
                   Not(Contains("layers.0.mlp.fc1.bias")), Not(Contains("layers.0.mlp.fc2.bias"))));
}

TEST(RecipeFlagsTest, NoPositionEmbeddingKeepsNoTable) {
  const absl::StatusOr<ResolvedConfig> none = Resolve({"--position-embedding-type", "none"});
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_THAT(ParameterNames(*none), Not(Contains("embedding.position_embeddings.weight")));
  const absl::StatusOr<ResolvedConfig> learned = Resolve({});
  ASSERT_TRUE(learned.ok()) << learned.status();
  EXPECT_THAT(ParameterNames(*learned), Contains("embedding.position_embeddings.weight"));
}

}  // namespace
}  // namespace conveyor
