// Mixture-of-experts Hugging Face folders (MixtralForCausalLM, Qwen2MoeForCausalLM with its
// gated shared expert, Qwen3MoeForCausalLM with norm_topk_prob both ways and dense layers)
// against an independent implementation: the
// test writes tiny random models in HF's layout, and computes HF's forward pass in double
// precision straight from the HF tensors (llama_forward.h for attention, and here the
// sparse MoE block of modeling_mixtral.py / modeling_qwen3_moe.py: router logits
// h G^T, softmax over all experts in float, the top k by probability (ties to the lower
// index, as torch.topk on these values), renormalised to sum 1 for Mixtral and
// norm_topk_prob, each picked expert's down(silu(gate h) * up h) weighted, plus Qwen2-MoE's
// sigmoid(h shared_expert_gate^T) * shared_expert(h)). Conveyor
// imports the folder as --load-hf does and its loss must match within 1e-5 relative, as
// for dense models; an export gives back the HF tensors bit for bit; expert-parallel and
// expert-tensor-parallel ranks read exactly their elements of each tensor.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/atomic_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/gpt_model.h"
#include "model/model_shape.h"
#include "parallel/self_communicator.h"
#include "runtime/cpu/cpu_ops.h"
#include "tests/trainer/hf/llama_checkpoint.h"
#include "tests/trainer/hf/llama_forward.h"
#include "tests/trainer/hf/slice_reads.h"
#include "tests/util/in_process_world.h"
#include "tests/util/test_dirs.h"
#include "trainer/checkpoint/checkpoint_writer.h"
#include "trainer/checkpoint/file_io.h"
#include "trainer/checkpoint/index_runs.h"
#include "trainer/config/flags.h"
#include "trainer/config/resolved_config.h"
#include "trainer/hf/export.h"
#include "trainer/hf/hf_folder.h"
#include "trainer/hf/llama_mapping.h"

namespace conveyor {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing_util::FreshDir;
using testing_util::LoadHfConfig;
using testing_util::Matrix;
using testing_util::Reference;
using testing_util::SaveAsCheckpoint;
using testing_util::WriteHfFolder;

constexpr int64_t kSeq = 8;

struct TinyMoe {
  std::string name;          // the test's
  std::string architecture;  // class name
  std::string model_type;
  int64_t layers = 2, hidden = 16, heads = 4, kv_heads = 2, vocab = 50;
  int64_t experts = 4, topk = 2, expert_ffn = 12, dense_ffn = 20;
  bool qk_norm = false;
  bool qkv_bias = false;
  int64_t shared_ffn = 0;             // Qwen2-MoE's gated shared expert
  bool normalised = true;             // Mixtral always; Qwen's norm_topk_prob
  std::vector<int64_t> dense_layers = {};  // Qwen's mlp_only_layers
  int64_t head_dim() const { return hidden / heads; }
  bool mixtral() const { return model_type == "mixtral"; }
  bool IsMoe(int64_t layer) const {
    return std::find(dense_layers.begin(), dense_layers.end(), layer) == dense_layers.end();
  }
};

std::vector<TinyMoe> Models() {
  TinyMoe mixtral{"mixtral", "MixtralForCausalLM", "mixtral"};
  TinyMoe qwen2{"qwen2_moe", "Qwen2MoeForCausalLM", "qwen2_moe"};
  qwen2.qkv_bias = true;
  qwen2.shared_ffn = 10;
  qwen2.normalised = false;
  TinyMoe qwen3{"qwen3_moe", "Qwen3MoeForCausalLM", "qwen3_moe"};
  qwen3.qk_norm = true;
  TinyMoe qwen3_pre = qwen3;
  qwen3_pre.name = "qwen3_moe_unnormalised_dense_first";
  qwen3_pre.normalised = false;
  qwen3_pre.dense_layers = {0};
  qwen3_pre.topk = 3;
  return {mixtral, qwen2, qwen3, qwen3_pre};
}

std::string ConfigJson(const TinyMoe& m) {
  std::string json = absl::StrCat(
      "{\"architectures\": [\"", m.architecture, "\"], \"model_type\": \"", m.model_type,
      "\", \"num_hidden_layers\": ", m.layers, ", \"hidden_size\": ", m.hidden,
      ", \"num_attention_heads\": ", m.heads, ", \"num_key_value_heads\": ", m.kv_heads,
      ", \"vocab_size\": ", m.vocab,
      ", \"max_position_embeddings\": 64, \"rope_theta\": 1000000.0, \"rms_norm_eps\": 1e-06"
      ", \"hidden_act\": \"silu\", \"tie_word_embeddings\": false, \"num_experts_per_tok\": ",
      m.topk, ", \"router_aux_loss_coef\": 0.02, \"output_router_logits\": false");
  if (m.mixtral()) {
    absl::StrAppend(&json, ", \"num_local_experts\": ", m.experts,
                    ", \"intermediate_size\": ", m.expert_ffn,
                    ", \"router_jitter_noise\": 0.0, \"sliding_window\": null");
  } else {
    absl::StrAppend(&json, ", \"num_experts\": ", m.experts, ", \"moe_intermediate_size\": ",
                    m.expert_ffn, ", \"intermediate_size\": ", m.dense_ffn,
                    ", \"norm_topk_prob\": ", m.normalised ? "true" : "false",
                    ", \"decoder_sparse_step\": 1, \"mlp_only_layers\": [",
                    absl::StrJoin(m.dense_layers, ", "), "], \"head_dim\": ", m.head_dim(),
                    ", \"use_sliding_window\": false");
    if (m.qk_norm) absl::StrAppend(&json, ", \"attention_bias\": false");
    if (m.shared_ffn > 0) {
      absl::StrAppend(&json, ", \"shared_expert_intermediate_size\": ", m.shared_ffn);
    }
  }
  return json + "}";
}

// The HF names of layer `layer`'s MoE block and of expert e's gate, up and down.
std::string MoePrefix(const TinyMoe& m, int64_t layer) {
  return absl::StrCat("model.layers.", layer, m.mixtral() ? ".block_sparse_moe." : ".mlp.");
}
std::vector<std::string> ExpertNames(const TinyMoe& m, int64_t layer, int64_t e) {
  const std::string x = absl::StrCat(MoePrefix(m, layer), "experts.", e, ".");
  if (m.mixtral()) return {x + "w1.weight", x + "w3.weight", x + "w2.weight"};
  return {x + "gate_proj.weight", x + "up_proj.weight", x + "down_proj.weight"};
}

// The reference's view of the model.
testing_util::LlamaSpec Spec(const TinyMoe& m) {
  return {m.layers, m.heads, m.kv_heads, m.head_dim(), 1000000.0,
          1e-6,     false,   m.qkv_bias, m.qk_norm};
}

// Random HF weights (norm gains around 1, others ~ N(0, 0.3)).
HfTensorMap RandomWeights(const TinyMoe& m, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.3f);
  HfTensorMap t;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, float mean) {
    HfTensor& tensor = t[name];
    tensor.shape = shape;
    tensor.data.resize(NumElements(shape));
    for (float& v : tensor.data) v = mean + normal(rng);
  };
  add("model.embed_tokens.weight", {m.vocab, m.hidden}, 0);
  add("model.norm.weight", {m.hidden}, 1);
  add("lm_head.weight", {m.vocab, m.hidden}, 0);
  for (int64_t i = 0; i < m.layers; ++i) {
    testing_util::AddAttentionTensors(Spec(m), m.hidden, i, add);
    const std::string l = absl::StrCat("model.layers.", i, ".");
    if (!m.IsMoe(i)) {
      add(l + "mlp.gate_proj.weight", {m.dense_ffn, m.hidden}, 0);
      add(l + "mlp.up_proj.weight", {m.dense_ffn, m.hidden}, 0);
      add(l + "mlp.down_proj.weight", {m.hidden, m.dense_ffn}, 0);
      continue;
    }
    add(MoePrefix(m, i) + "gate.weight", {m.experts, m.hidden}, 0);
    for (int64_t e = 0; e < m.experts; ++e) {
      const std::vector<std::string> names = ExpertNames(m, i, e);
      add(names[0], {m.expert_ffn, m.hidden}, 0);
      add(names[1], {m.expert_ffn, m.hidden}, 0);
      add(names[2], {m.hidden, m.expert_ffn}, 0);
    }
    if (m.shared_ffn > 0) {
      const std::string shared = MoePrefix(m, i) + "shared_expert.";
      add(shared + "gate_proj.weight", {m.shared_ffn, m.hidden}, 0);
      add(shared + "up_proj.weight", {m.shared_ffn, m.hidden}, 0);
      add(shared + "down_proj.weight", {m.hidden, m.shared_ffn}, 0);
      add(MoePrefix(m, i) + "shared_expert_gate.weight", {1, m.hidden}, 0);
    }
  }
  return t;
}

// ---- The reference: the sparse MoE block in double, from the HF tensors. ----

Matrix SparseMoe(const TinyMoe& m, const HfTensorMap& t, int64_t layer, const Matrix& h) {
  const Matrix logits = testing_util::Linear(h, t.at(MoePrefix(m, layer) + "gate.weight"));
  std::vector<Matrix> outputs;  // each expert on every token
  for (int64_t e = 0; e < m.experts; ++e) {
    const std::vector<std::string> names = ExpertNames(m, layer, e);
    outputs.push_back(
        testing_util::SwigluMlp(h, t.at(names[0]), t.at(names[1]), t.at(names[2])));
  }
  Matrix y(h.size(), std::vector<double>(m.hidden, 0.0));
  for (size_t p = 0; p < h.size(); ++p) {
    const double top = *std::max_element(logits[p].begin(), logits[p].end());
    std::vector<double> prob(m.experts);
    double sum = 0;
    for (int64_t e = 0; e < m.experts; ++e) sum += prob[e] = std::exp(logits[p][e] - top);
    for (double& v : prob) v /= sum;
    std::vector<int64_t> order(m.experts);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return prob[a] > prob[b]; });
    double picked = 0;
    for (int64_t j = 0; j < m.topk; ++j) picked += prob[order[j]];
    for (int64_t j = 0; j < m.topk; ++j) {
      const double weight = prob[order[j]] / (m.normalised ? picked : 1.0);
      for (int64_t i = 0; i < m.hidden; ++i) y[p][i] += weight * outputs[order[j]][p][i];
    }
  }
  if (m.shared_ffn > 0) {  // Qwen2MoeSparseMoeBlock: + sigmoid(shared_expert_gate(h)) * shared(h)
    const std::string shared = MoePrefix(m, layer) + "shared_expert.";
    const Matrix out = testing_util::SwigluMlp(h, t.at(shared + "gate_proj.weight"),
                                               t.at(shared + "up_proj.weight"),
                                               t.at(shared + "down_proj.weight"));
    const Matrix z =
        testing_util::Linear(h, t.at(MoePrefix(m, layer) + "shared_expert_gate.weight"));
    for (size_t p = 0; p < h.size(); ++p) {
      const double gate = 1.0 / (1.0 + std::exp(-z[p][0]));
      for (int64_t i = 0; i < m.hidden; ++i) y[p][i] += gate * out[p][i];
    }
  }
  return y;
}

Reference HfForward(const TinyMoe& m, const HfTensorMap& t, const std::vector<int32_t>& tokens,
                    const std::vector<int32_t>& labels) {
  return testing_util::LlamaForward(Spec(m), t, tokens, labels, [&](int64_t layer, const Matrix& h) {
    if (m.IsMoe(layer)) return SparseMoe(m, t, layer, h);
    const std::string l = absl::StrCat("model.layers.", layer, ".mlp.");
    return testing_util::SwigluMlp(h, t.at(l + "gate_proj.weight"), t.at(l + "up_proj.weight"),
                                   t.at(l + "down_proj.weight"));
  });
}

// ---- Conveyor's side. ----

class MoeReferenceTest : public ::testing::TestWithParam<TinyMoe> {};

TEST_P(MoeReferenceTest, ConfigJsonSetsTheMoeFlags) {
  const TinyMoe m = GetParam();
  const std::string dir = WriteHfFolder(ConfigJson(m), RandomWeights(m, 3), m.name + "_flags");
  const absl::StatusOr<ResolvedConfig> config = LoadHfConfig(dir, kSeq);
  ASSERT_TRUE(config.ok()) << config.status();
  const ModelConfig& model = config->config().model();
  EXPECT_EQ(model.num_experts(), m.experts);
  EXPECT_EQ(model.moe_router_topk(), m.topk);
  EXPECT_EQ(model.moe_ffn_hidden_size(), m.expert_ffn);
  EXPECT_EQ(model.moe_router_pre_softmax(), !m.normalised);
  EXPECT_EQ(model.moe_layer_freq(), m.dense_layers.empty() ? "1" : "[0,1]");
  EXPECT_EQ(model.moe_router_score_function(), "softmax");
  EXPECT_EQ(model.moe_shared_expert_intermediate_size(), m.shared_ffn);
  EXPECT_EQ(model.moe_shared_expert_gate(), m.shared_ffn > 0);
  EXPECT_EQ(model.add_qkv_bias(), m.qkv_bias);
}

TEST_P(MoeReferenceTest, FirstStepLossAndLogitsMatchTheReference) {
  const TinyMoe m = GetParam();
  const HfTensorMap weights = RandomWeights(m, 17);
  const std::string dir = WriteHfFolder(ConfigJson(m), weights, m.name);
  const absl::StatusOr<ResolvedConfig> config = LoadHfConfig(dir, kSeq);
  ASSERT_TRUE(config.ok()) << config.status();
  const absl::StatusOr<GlobalTensorMap> imported = ReadHf(dir, config->config());
  ASSERT_TRUE(imported.ok()) << imported.status();

  const ModelShape& shape = config->model_shape();
  const TensorParallel one_rank;
  GptModel model(&CpuOps::Get(), shape, /*seed=*/1, &one_rank);
  testing_util::CopyImportedParameters(*imported, &model);
  const auto [tokens, labels] = testing_util::FixedTokensAndLabels(kSeq, m.vocab);
  const MicroBatchContext mb{1, 0, 1, kSeq, /*training=*/false};
  GptStash stash;
  const absl::StatusOr<float> loss = model.Forward(mb, tokens.data(), labels.data(), &stash);
  ASSERT_TRUE(loss.ok()) << loss.status();

  const Reference ref = HfForward(m, weights, tokens, labels);
  EXPECT_NEAR(*loss, ref.loss, 1e-5 * ref.loss);
  const Tensor& logits = stash.head.output.logits;
  const double worst =
      testing_util::WorstRelativeLogitError(ref.logits, logits.data(), shape.padded_vocab);
  EXPECT_LT(worst, 1e-5) << "largest relative logit error";
  RecordProperty("relative_loss_error", absl::StrCat(std::fabs(*loss - ref.loss) / ref.loss));
}

TEST_P(MoeReferenceTest, ExportThenImportIsBitExact) {
  const TinyMoe m = GetParam();
  const HfTensorMap weights = RandomWeights(m, 23);
  const std::string dir = WriteHfFolder(ConfigJson(m), weights, m.name + "_in");
  const absl::StatusOr<ResolvedConfig> config = LoadHfConfig(dir, kSeq);
  ASSERT_TRUE(config.ok()) << config.status();
  absl::StatusOr<GlobalTensorMap> imported = ReadHf(dir, config->config());
  ASSERT_TRUE(imported.ok()) << imported.status();
  const std::string save = SaveAsCheckpoint(*config, &*imported, m.name + "_ckpt");

  HfExportSummary summary;
  const std::string out = FreshDir(m.name + "_out");
  const absl::Status exported_ok = ExportHf(save, std::nullopt, out, HfExportOptions(), &summary);
  ASSERT_TRUE(exported_ok.ok()) << exported_ok;
  EXPECT_EQ(summary.architecture, m.architecture);
  const absl::StatusOr<HfTensorMap> exported =
      ReadHfWeights(out, [](const std::string&) { return false; });
  ASSERT_TRUE(exported.ok()) << exported.status();
  ASSERT_EQ(exported->size(), weights.size());
  for (const auto& [name, tensor] : weights) {
    ASSERT_EQ(exported->count(name), 1) << name;
    EXPECT_EQ(exported->at(name).shape, tensor.shape) << name;
    EXPECT_TRUE(exported->at(name).data == tensor.data) << name << " differs";
  }
  // The export's config.json configures the same model.
  const absl::StatusOr<ResolvedConfig> again = LoadHfConfig(out, kSeq);
  ASSERT_TRUE(again.ok()) << again.status();
  const absl::StatusOr<GlobalTensorMap> reimported = ReadHf(out, again->config());
  ASSERT_TRUE(reimported.ok()) << reimported.status();
  EXPECT_TRUE(*reimported == *imported);
  const absl::StatusOr<std::string> json = ReadSmallFile(JoinPath(out, kHfConfigFile));
  ASSERT_TRUE(json.ok());
  EXPECT_THAT(*json, AllOf(HasSubstr(absl::StrCat("\"num_experts_per_tok\": ", m.topk, ",")),
                           HasSubstr(m.mixtral() ? "\"num_local_experts\": 4,"
                                                 : "\"num_experts\": 4,")));
}

// Each rank of an expert layout reads exactly the elements its parameters keep: expert
// parallelism 2 (two experts each), expert-tensor parallelism under TP 2 (each expert's
// rows split), and TP 2 with ETP 1 and EP 2 (whole experts, two per rank).
TEST_P(MoeReferenceTest, ExpertLayoutsReadOnlyTheirElements) {
  const TinyMoe m = GetParam();
  const HfTensorMap weights = RandomWeights(m, 31);
  const std::string dir = WriteHfFolder(ConfigJson(m), weights, m.name + "_slices");
  const absl::StatusOr<ResolvedConfig> config = LoadHfConfig(dir, kSeq);
  ASSERT_TRUE(config.ok()) << config.status();
  const absl::StatusOr<GlobalTensorMap> whole = ReadHf(dir, config->config());
  ASSERT_TRUE(whole.ok()) << whole.status();
  const int64_t file_bytes = testing_util::F32DataBytes(weights);

  testing_util::ExpectExpertLayoutReadsMatchWholeRead(dir, *config, *whole, file_bytes);
}

INSTANTIATE_TEST_SUITE_P(Architectures, MoeReferenceTest, ::testing::ValuesIn(Models()),
                         [](const ::testing::TestParamInfo<TinyMoe>& test) {
                           return test.param.name;
                         });

TEST(MoeConfigTest, FieldsThatChangeTheMathAreRefusedOrContradictFlags) {
  TinyMoe m = Models()[0];
  std::string json = ConfigJson(m);
  json.back() = ',';
  json += " \"router_jitter_noise\": 0.1}";
  json.replace(json.find("\"router_jitter_noise\": 0.0, "), 28, "");
  const std::string dir = WriteHfFolder(json, RandomWeights(m, 1), "jitter");
  const absl::StatusOr<ResolvedConfig> config = LoadHfConfig(dir, kSeq);
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(), HasSubstr("router_jitter_noise = 0.1 is not supported"));

  const std::string ok = WriteHfFolder(ConfigJson(m), RandomWeights(m, 1), "contradiction");
  const absl::StatusOr<ResolvedConfig> contradicted =
      LoadHfConfig(ok, kSeq, {"--moe-router-pre-softmax", "--num-experts", "8",
                     "--moe-router-score-function", "sigmoid"});
  ASSERT_FALSE(contradicted.ok());
  EXPECT_THAT(contradicted.status().message(),
              AllOf(HasSubstr("--num-experts 8 contradicts num_local_experts = 4"),
                    HasSubstr("--moe-router-pre-softmax true contradicts"),
                    HasSubstr("--moe-router-score-function sigmoid contradicts")));
}

}  // namespace
}  // namespace conveyor
