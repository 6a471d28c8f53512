// Multi-latent attention's flags end to end before training: Megatron's spellings parse
// into the config (--mla-down-proj-fusion a warned no-op), validation names each broken
// rule, the model's plain numbers are DeepSeek's widths, the memory model's parameter
// count (what --dry-run prints) equals the built model's and a count written here from
// DeepSeek-V2's definition, and the Hugging Face export refuses it by name.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/gpt_model.h"
#include "model/memory_model.h"
#include "proto/config.pb.h"
#include "runtime/cpu/cpu_ops.h"
#include "trainer/config/config_validation.h"
#include "trainer/config/flags.h"
#include "trainer/config/resolved_config.h"
#include "trainer/hf/hf_architecture.h"

namespace conveyor {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;

// A DeepSeek-V2-like model at toy size: hidden 32, 4 heads, a query latent of 12, a
// key/value latent of 10, query and key heads of 6 + 4 rotated dims, value heads of 5.
Config Mla() {
  Config c;
  c.mutable_data()->set_mock_data(true);
  ModelConfig& m = *c.mutable_model();
  m.set_vocab_size(60);
  m.set_make_vocab_size_divisible_by(16);
  m.set_num_layers(2);
  m.set_hidden_size(32);
  m.set_num_attention_heads(4);
  m.set_ffn_hidden_size(64);
  m.set_seq_length(8);
  m.set_position_embedding_type("rope");
  m.set_normalization("RMSNorm");
  m.set_qk_layernorm(true);
  m.set_multi_latent_attention(true);
  m.set_q_lora_rank(12);
  m.set_kv_lora_rank(10);
  m.set_qk_head_dim(6);
  m.set_qk_pos_emb_head_dim(4);
  m.set_v_head_dim(5);
  return c;
}

TEST(MlaConfigTest, MegatronsFlagsParse) {
  std::vector<std::string> ignored;
  const absl::StatusOr<Config> c =
      ParseFlags({"--multi-latent-attention", "--q-lora-rank", "1536", "--kv-lora-rank", "512",
                  "--qk-head-dim", "128", "--qk-pos-emb-head-dim", "64", "--v-head-dim", "128",
                  "--mla-down-proj-fusion"},
                 &ignored);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->model().multi_latent_attention());
  EXPECT_EQ(c->model().q_lora_rank(), 1536);
  EXPECT_EQ(c->model().kv_lora_rank(), 512);
  EXPECT_EQ(c->model().qk_head_dim(), 128);
  EXPECT_EQ(c->model().qk_pos_emb_head_dim(), 64);
  EXPECT_EQ(c->model().v_head_dim(), 128);
  EXPECT_THAT(ignored, ElementsAre("--mla-down-proj-fusion"));
  // Megatron's defaults where the flags are left out.
  const absl::StatusOr<Config> defaults = ParseFlags({"--multi-latent-attention"}, &ignored);
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->model().q_lora_rank(), 0);
  EXPECT_EQ(defaults->model().kv_lora_rank(), 32);
  EXPECT_EQ(defaults->model().qk_head_dim(), 128);
  EXPECT_EQ(defaults->model().qk_pos_emb_head_dim(), 64);
  EXPECT_EQ(defaults->model().v_head_dim(), 128);
}

TEST(MlaConfigTest, ValidationNamesEachBrokenRule) {
  EXPECT_THAT(ValidateConfig(Mla(), 1), IsEmpty());
  Config c = Mla();
  c.mutable_model()->set_kv_lora_rank(0);
  EXPECT_THAT(ValidateConfig(c, 1),
              ElementsAre("--kv-lora-rank 0 must be positive under --multi-latent-attention: "
                          "set --kv-lora-rank > 0"));
  c = Mla();
  c.mutable_model()->set_qk_pos_emb_head_dim(3);
  EXPECT_THAT(ValidateConfig(c, 1),
              ElementsAre("--qk-pos-emb-head-dim 3 must be even: RoPE rotates pairs of dims"));
  c = Mla();
  c.mutable_model()->set_position_embedding_type("learned_absolute");
  EXPECT_THAT(ValidateConfig(c, 1),
              ElementsAre(StartsWith("--multi-latent-attention needs --position-embedding-type "
                                     "rope or yarn (not learned_absolute)")));
  c = Mla();
  c.mutable_model()->set_rotary_percent(0.5f);
  EXPECT_THAT(ValidateConfig(c, 1), ElementsAre(StartsWith("--rotary-percent 0.5 with "
                                                           "--multi-latent-attention")));
  c = Mla();
  c.mutable_model()->set_add_qkv_bias(true);
  EXPECT_THAT(ValidateConfig(c, 1),
              ElementsAre(StartsWith("--add-qkv-bias with --multi-latent-attention")));
  c = Mla();
  c.mutable_parallel()->set_device("cuda");
  EXPECT_THAT(ValidateConfig(c, 1),
              ElementsAre(AllOf(StartsWith("--multi-latent-attention with --device cuda"),
                                HasSubstr("are written and compiled but have never run on a "
                                          "GPU"))));
  c = Mla();
  c.mutable_recompute()->set_recompute_granularity("selective");
  c.mutable_recompute()->add_recompute_modules("mla_up_proj");
  EXPECT_THAT(ValidateConfig(c, 1), ElementsAre(HasSubstr("mla_up_proj")));
  // Without the switch the widths are Megatron's unused defaults, not checked.
  c = Mla();
  c.mutable_model()->set_multi_latent_attention(false);
  c.mutable_model()->set_kv_lora_rank(0);
  EXPECT_THAT(ValidateConfig(c, 1), IsEmpty());
}

TEST(MlaConfigTest, TheModelReadsDeepSeeksWidths) {
  const absl::StatusOr<ResolvedConfig> r = ResolvedConfig::Resolve(Mla(), 1);
  ASSERT_TRUE(r.ok()) << r.status();
  const ModelShape& s = r->model_shape();
  EXPECT_TRUE(s.mla.enabled);
  EXPECT_EQ(s.mla.q_lora_rank, 12);
  EXPECT_EQ(s.mla.kv_lora_rank, 10);
  EXPECT_EQ(s.query_groups, 4);  // a key and a value head per query head
  EXPECT_EQ(s.head_dim, 10);     // query and key heads: 6 + 4
  EXPECT_EQ(s.value_head_dim(), 5);
  EXPECT_EQ(s.rotary_dims(), 4);  // RoPE turns the decoupled part only
}

// DeepSeek-V2's parameters of the toy model, counted from the definition: per layer the
// input norm, W_dq, the query latent's norm, W_uq, W_dkv (latent and the shared rotated
// key part), the key/value latent's norm, W_ukv, W_o (with Megatron's output bias), the
// MLP's norm, fc1 and fc2 with biases; the embedding (64 padded rows, tied) and the final
// norm.
int64_t DefinitionParameters() {
  const int64_t h = 32, heads = 4, q_latent = 12, kv_latent = 10, qk = 6 + 4, v = 5;
  const int64_t layer = h + q_latent * h + q_latent + heads * qk * q_latent + (kv_latent + 4) * h +
                        kv_latent + heads * (6 + v) * kv_latent + h * heads * v + h + h +
                        (64 * h + 64) + (h * 64 + h);
  return 2 * layer + 64 * h + h;
}

TEST(MlaConfigTest, ParametersAreCountedExactly) {
  const absl::StatusOr<ResolvedConfig> r = ResolvedConfig::Resolve(Mla(), 1);
  ASSERT_TRUE(r.ok()) << r.status();
  const TensorParallel one_rank;
  GptModel model(&CpuOps::Get(), r->model_shape(), /*seed=*/1, &one_rank);
  EXPECT_EQ(model.parameters().NumElements(), DefinitionParameters());
  pipeline::Timeline one_forward;
  one_forward.ranks = {{pipeline::TimedAction{pipeline::Forward(0), 0, 1}}};
  const absl::StatusOr<std::vector<RankMemory>> predicted =
      PredictMemory(MemoryInputsOf(*r), r->model_shape(), one_forward);
  ASSERT_TRUE(predicted.ok()) << predicted.status();
  EXPECT_EQ(predicted->front().parameters, DefinitionParameters());
}

TEST(MlaConfigTest, HuggingFaceExportIsDeepseekV3) {
  const absl::StatusOr<const HfArchitecture*> arch = HfArchitectureForExport(Mla(), "");
  ASSERT_TRUE(arch.ok()) << arch.status();
  EXPECT_STREQ((*arch)->class_name, "DeepseekV3ForCausalLM");
  const absl::StatusOr<const HfArchitecture*> llama =
      HfArchitectureForExport(Mla(), "LlamaForCausalLM");
  ASSERT_FALSE(llama.ok());
  EXPECT_THAT(std::string(llama.status().message()),
              StartsWith("--architecture LlamaForCausalLM cannot hold this model (multi-latent"));
}

}  // namespace
}  // namespace conveyor
