// The memory model for multi-token prediction against the allocator: the parameters and
// weight bytes the depths add on the last stage, and the bytes one micro-batch's forward
// leaves stashed through them, exactly.
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "model/gpt_stage.h"
#include "model/memory_model.h"
#include "runtime/memory_tracker.h"
#include "tests/model/one_forward_memory.h"
#include "trainer/config/config_validation.h"
#include "trainer/config/resolved_config.h"

namespace conveyor::testing_util {
namespace {

struct MtpCase {
  std::string name;
  bool moe = false;
  bool selective = false;
  bool bf16 = false;
  bool layer_norm = false;  // LayerNorm (two parameters per norm) and a tied output layer
};

Config MtpConfig(const MtpCase& mc) {
  Config c;
  ModelConfig& m = *c.mutable_model();
  m.set_num_layers(2);
  m.set_hidden_size(32);
  m.set_num_attention_heads(4);
  m.set_ffn_hidden_size(64);
  m.set_seq_length(8);
  m.set_vocab_size(60);
  m.set_make_vocab_size_divisible_by(16);
  m.set_position_embedding_type("rope");
  m.set_mtp_num_layers(2);
  if (!mc.layer_norm) {
    m.set_normalization("RMSNorm");
    m.set_swiglu(true);
    m.set_untie_embeddings_and_output_weights(true);
  }
  if (mc.moe) {
    m.set_disable_bias_linear(true);
    m.set_num_experts(4);
    m.set_moe_ffn_hidden_size(24);
    m.set_moe_layer_freq("[0,1]");  // the last layer, and so the depths', MoE
  }
  if (mc.selective) {
    c.mutable_recompute()->set_recompute_granularity("selective");
    for (const char* module : {"core_attn", "mlp", "layernorm"}) {
      c.mutable_recompute()->add_recompute_modules(module);
    }
  }
  c.mutable_training()->set_micro_batch_size(1);
  c.mutable_training()->set_global_batch_size(1);
  c.mutable_data()->set_mock_data(true);
  c.mutable_precision()->set_bf16(mc.bf16);
  absl::StatusOr<Config> resolved = ResolveConfig(c, 1);
  EXPECT_TRUE(resolved.ok()) << resolved.status();
  return *resolved;
}

class MtpMemoryTest : public ::testing::TestWithParam<MtpCase> {};

TEST_P(MtpMemoryTest, ForwardStashAndWeightsAreWhatTheModelPredicts) {
  const absl::StatusOr<ResolvedConfig> config = ResolvedConfig::Resolve(MtpConfig(GetParam()), 1);
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_EQ(config->model_shape().mtp_layers, 2);
  ExpectOneStageMatchesPrediction(*config, 2, GetParam().bf16);
}

INSTANTIATE_TEST_SUITE_P(Settings, MtpMemoryTest,
                         ::testing::Values(MtpCase{"llama"}, MtpCase{"moe", true},
                                           MtpCase{"selective", false, true},
                                           MtpCase{"bf16_moe", true, false, true},
                                           MtpCase{"layernorm_tied", false, false, false, true}),
                         [](const ::testing::TestParamInfo<MtpCase>& test) {
                           return test.param.name;
                         });

}  // namespace
}  // namespace conveyor::testing_util
