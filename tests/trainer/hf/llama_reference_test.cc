// Llama-family Hugging Face folders (LlamaForCausalLM, MistralForCausalLM,
// Qwen2ForCausalLM, Qwen3ForCausalLM) against an independent implementation: tiny random
// models are written in HF's layout by this test; the reference below computes HF's
// forward pass (modeling_llama.py's formulas: separate q/k/v projections, rotate_half
// RoPE, repeat_kv grouped attention, RMSNorm, SwiGLU MLP; modeling_qwen3.py's q_norm and
// k_norm over each head before RoPE) in double precision straight from
// the HF tensors. Conveyor imports the folder (--load-hf's path: config.json sets the
// model flags) and its first-step loss and logits must match within 1e-5 relative;
// an export of the imported model must give back the HF tensors bit for bit.
#include <cmath>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/atomic_file.h"
#include "data/python_json.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/gpt_model.h"
#include "model/model_shape.h"
#include "parallel/self_communicator.h"
#include "runtime/cpu/cpu_ops.h"
#include "tests/trainer/hf/hf_reference.h"
#include "tests/trainer/hf/llama_checkpoint.h"
#include "tests/trainer/hf/llama_forward.h"
#include "tests/trainer/hf/slice_reads.h"
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

// One tiny model per architecture, sized so that every mapping step matters: grouped
// heads (4 query heads over 2 key/value heads), a vocabulary Conveyor pads (50 -> 128).
struct TinyModel {
  std::string architecture;  // class name
  std::string model_type;
  int64_t layers = 2, hidden = 16, heads = 4, kv_heads = 2, ffn = 24, vocab = 50;
  double rope_theta = 10000.0;
  double eps = 1e-6;
  bool tied = false;
  bool qkv_bias = false;
  bool qk_norm = false;
  int64_t max_shard_bytes = 5000000000;  // small: the folder is written sharded
  int64_t head_dim() const { return hidden / heads; }
};

std::vector<TinyModel> Models() {
  TinyModel llama{"LlamaForCausalLM", "llama"};
  TinyModel mistral{"MistralForCausalLM", "mistral"};
  mistral.rope_theta = 1000000.0;
  mistral.eps = 1e-5;
  mistral.max_shard_bytes = 4096;  // several shards and an index
  TinyModel qwen2{"Qwen2ForCausalLM", "qwen2"};
  qwen2.tied = true;
  qwen2.qkv_bias = true;
  TinyModel qwen3{"Qwen3ForCausalLM", "qwen3"};
  qwen3.tied = true;
  qwen3.qk_norm = true;
  return {llama, mistral, qwen2, qwen3};
}

std::string ConfigJson(const TinyModel& m) {
  std::string json = absl::StrCat(
      "{\"architectures\": [\"", m.architecture, "\"], \"model_type\": \"", m.model_type,
      "\", \"num_hidden_layers\": ", m.layers, ", \"hidden_size\": ", m.hidden,
      ", \"intermediate_size\": ", m.ffn, ", \"num_attention_heads\": ", m.heads,
      ", \"num_key_value_heads\": ", m.kv_heads, ", \"vocab_size\": ", m.vocab,
      ", \"max_position_embeddings\": 64, \"rope_theta\": ", m.rope_theta,
      ", \"rms_norm_eps\": ", m.eps,
      ", \"hidden_act\": \"silu\", \"tie_word_embeddings\": ", m.tied ? "true" : "false",
      ", \"rope_scaling\": null");
  if (m.model_type == "mistral") absl::StrAppend(&json, ", \"sliding_window\": 4096");
  if (m.model_type == "qwen2" || m.model_type == "qwen3") {
    absl::StrAppend(&json, ", \"use_sliding_window\": false, \"sliding_window\": 4");
  }
  if (m.model_type == "qwen3") {
    absl::StrAppend(&json, ", \"head_dim\": ", m.head_dim(), ", \"attention_bias\": false");
  }
  return json + "}";
}

// The reference's view of the model.
testing_util::LlamaSpec Spec(const TinyModel& m) {
  return {m.layers, m.heads,  m.kv_heads, m.head_dim(), m.rope_theta,
          m.eps,    m.tied,   m.qkv_bias, m.qk_norm};
}

// Random HF weights (norm gains around 1, others ~ N(0, 0.3)).
HfTensorMap RandomWeights(const TinyModel& m, uint32_t seed) {
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
  if (!m.tied) add("lm_head.weight", {m.vocab, m.hidden}, 0);
  for (int64_t i = 0; i < m.layers; ++i) {
    testing_util::AddAttentionTensors(Spec(m), m.hidden, i, add);
    const std::string l = absl::StrCat("model.layers.", i, ".");
    add(l + "mlp.gate_proj.weight", {m.ffn, m.hidden}, 0);
    add(l + "mlp.up_proj.weight", {m.ffn, m.hidden}, 0);
    add(l + "mlp.down_proj.weight", {m.hidden, m.ffn}, 0);
  }
  return t;
}

// ---- The reference: modeling_llama.py's forward pass in double, from the HF tensors. ----

Reference HfForward(const TinyModel& m, const HfTensorMap& t, const std::vector<int32_t>& tokens,
                    const std::vector<int32_t>& labels) {
  return testing_util::LlamaForward(Spec(m), t, tokens, labels, [&](int64_t layer, const Matrix& h) {
    const std::string l = absl::StrCat("model.layers.", layer, ".mlp.");
    return testing_util::SwigluMlp(h, t.at(l + "gate_proj.weight"), t.at(l + "up_proj.weight"),
                                   t.at(l + "down_proj.weight"));
  });
}

// ---- Conveyor's side. ----

// Writes the folder: config.json and the weights (sharded when the model says so).
std::string WriteFolder(const TinyModel& m, const HfTensorMap& weights, const std::string& name) {
  return WriteHfFolder(ConfigJson(m), weights, name, m.max_shard_bytes);
}

class LlamaReferenceTest : public ::testing::TestWithParam<TinyModel> {};

TEST_P(LlamaReferenceTest, FirstStepLossAndLogitsMatchTheReference) {
  const TinyModel m = GetParam();
  const HfTensorMap weights = RandomWeights(m, 17);
  const std::string dir = WriteFolder(m, weights, m.model_type);
  const absl::StatusOr<ResolvedConfig> config = LoadHfConfig(dir, kSeq);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->config().model().num_query_groups(), m.kv_heads);
  EXPECT_EQ(config->config().model().untie_embeddings_and_output_weights(), !m.tied);
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
  const Tensor& logits = stash.head.output.logits;  // [tokens, padded vocabulary]
  ASSERT_EQ(logits.dim(1), shape.padded_vocab);
  const double worst =
      testing_util::WorstRelativeLogitError(ref.logits, logits.data(), shape.padded_vocab);
  EXPECT_LT(worst, 1e-5) << "largest relative logit error";
  RecordProperty("largest_relative_logit_error", absl::StrCat(worst));
  RecordProperty("relative_loss_error", absl::StrCat(std::fabs(*loss - ref.loss) / ref.loss));
}

// Saves the imported tensors as a one-rank checkpoint, exports it with --format hf,
// and reads both the export's HF tensors and its re-import: bit-exact both ways.
TEST_P(LlamaReferenceTest, ExportThenImportIsBitExact) {
  const TinyModel m = GetParam();
  const HfTensorMap weights = RandomWeights(m, 23);
  const std::string dir = WriteFolder(m, weights, m.model_type + "_in");
  const absl::StatusOr<ResolvedConfig> config = LoadHfConfig(dir, kSeq);
  ASSERT_TRUE(config.ok()) << config.status();
  absl::StatusOr<GlobalTensorMap> imported = ReadHf(dir, config->config());
  ASSERT_TRUE(imported.ok()) << imported.status();
  const std::string save = SaveAsCheckpoint(*config, &*imported, m.model_type + "_ckpt");

  HfExportOptions options;
  options.max_shard_bytes = m.max_shard_bytes;
  options.ids = HfTokenIds{1, 2};
  HfExportSummary summary;
  const std::string out = FreshDir(m.model_type + "_out");
  ASSERT_TRUE(ExportHf(save, std::nullopt, out, options, &summary).ok());
  EXPECT_EQ(summary.architecture, m.qk_norm    ? "Qwen3ForCausalLM"
                                  : m.qkv_bias ? "Qwen2ForCausalLM"
                                               : "LlamaForCausalLM");
  EXPECT_EQ(summary.tensors, int64_t(weights.size()));
  EXPECT_EQ(PathExists(JoinPath(out, kHfIndexFile)), m.max_shard_bytes < 100000);

  const absl::StatusOr<HfTensorMap> exported =
      ReadHfWeights(out, [](const std::string&) { return false; });
  ASSERT_TRUE(exported.ok()) << exported.status();
  ASSERT_EQ(exported->size(), weights.size());
  for (const auto& [name, tensor] : weights) {
    ASSERT_EQ(exported->count(name), 1) << name;
    EXPECT_EQ(exported->at(name).shape, tensor.shape) << name;
    EXPECT_TRUE(exported->at(name).data == tensor.data) << name << " differs";
  }
  const absl::StatusOr<GlobalTensorMap> reimported = ReadHf(out, config->config());
  ASSERT_TRUE(reimported.ok()) << reimported.status();
  EXPECT_TRUE(*reimported == *imported);

  // The files transformers reads: sorted keys, the architecture, the token ids.
  const absl::StatusOr<std::string> config_json = ReadSmallFile(JoinPath(out, kHfConfigFile));
  ASSERT_TRUE(config_json.ok());
  EXPECT_THAT(
      *config_json,
      AllOf(HasSubstr(absl::StrCat("\"architectures\": [\n    \"", summary.architecture)),
            HasSubstr("\"num_key_value_heads\": 2,"), HasSubstr("\"bos_token_id\": 1,"),
            HasSubstr(absl::StrCat("\"tie_word_embeddings\": ", m.tied ? "true" : "false"))));
  EXPECT_TRUE(PathExists(JoinPath(out, kHfGenerationConfigFile)));
}

// The fp32 `value` rounded to bfloat16 (7 fraction bits) or binary16 (10, smallest
// normal 2^-14), to nearest even, in double arithmetic: the test's own conversion.
double Rounded(float value, HfDtype dtype) {
  if (value == 0.0f) return value;
  const int fraction_bits = dtype == HfDtype::kBF16 ? 7 : 10;
  const int min_exponent = dtype == HfDtype::kBF16 ? -126 : -14;
  const double spacing =
      std::ldexp(1.0, std::max(std::ilogb(double(value)), min_exponent) - fraction_bits);
  return std::nearbyint(double(value) / spacing) * spacing;  // weights never overflow
}

// export --dtype bf16 / fp16: the files hold every weight rounded to nearest even (the
// test's conversion), config.json says torch_dtype, and --load-hf reads the export back
// as exactly those values.
TEST_P(LlamaReferenceTest, ExportInHalfPrecisionRoundsToNearestEven) {
  const TinyModel m = GetParam();
  const HfTensorMap weights = RandomWeights(m, 29);
  const std::string dir = WriteFolder(m, weights, m.model_type + "_half_in");
  const absl::StatusOr<ResolvedConfig> config = LoadHfConfig(dir, kSeq);
  ASSERT_TRUE(config.ok()) << config.status();
  absl::StatusOr<GlobalTensorMap> imported = ReadHf(dir, config->config());
  ASSERT_TRUE(imported.ok()) << imported.status();
  const std::string save = SaveAsCheckpoint(*config, &*imported, m.model_type + "_half_ckpt");
  for (const HfDtype dtype : {HfDtype::kBF16, HfDtype::kF16}) {
    HfExportOptions options;
    options.max_shard_bytes = m.max_shard_bytes;
    options.dtype = dtype;
    const std::string out =
        FreshDir(absl::StrCat(m.model_type, "_", SafetensorsDtypeName(dtype), "_out"));
    ASSERT_TRUE(ExportHf(save, std::nullopt, out, options, nullptr).ok());
    const absl::StatusOr<HfTensorMap> exported =
        ReadHfWeights(out, [](const std::string&) { return false; });
    ASSERT_TRUE(exported.ok()) << exported.status();
    ASSERT_EQ(exported->size(), weights.size());
    for (const auto& [name, tensor] : weights) {
      const std::vector<float>& got = exported->at(name).data;
      ASSERT_EQ(got.size(), tensor.data.size()) << name;
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(double(got[i]), Rounded(tensor.data[i], dtype))
            << name << "[" << i << "] as " << SafetensorsDtypeName(dtype);
      }
    }
    const absl::StatusOr<std::string> config_json = ReadSmallFile(JoinPath(out, kHfConfigFile));
    ASSERT_TRUE(config_json.ok());
    EXPECT_THAT(*config_json,
                HasSubstr(absl::StrCat("\"torch_dtype\": \"", TorchDtypeName(dtype), "\"")));
    const absl::StatusOr<GlobalTensorMap> reimported = ReadHf(out, config->config());
    ASSERT_TRUE(reimported.ok()) << reimported.status();
    EXPECT_EQ(reimported->size(), imported->size());
  }
}

// A pipeline stage reads only its tensors: the same values as a whole read.
TEST_P(LlamaReferenceTest, ReadsOnlyTheWantedTensors) {
  const TinyModel m = GetParam();
  const std::string dir = WriteFolder(m, RandomWeights(m, 5), m.model_type + "_part");
  const absl::StatusOr<ResolvedConfig> config = LoadHfConfig(dir, kSeq);
  ASSERT_TRUE(config.ok()) << config.status();
  const absl::StatusOr<GlobalTensorMap> all = ReadHf(dir, config->config());
  ASSERT_TRUE(all.ok()) << all.status();
  const std::set<std::string> wanted = {"layers.1.attention.qkv.weight", "final_norm.weight"};
  const absl::StatusOr<GlobalTensorMap> part = ReadHf(dir, config->config(), &wanted);
  ASSERT_TRUE(part.ok()) << part.status();
  ASSERT_EQ(part->size(), wanted.size());
  for (const std::string& name : wanted) EXPECT_TRUE(part->at(name) == all->at(name)) << name;
}

// --load-hf under TP 2: each rank asks for the elements its parameters keep (their
// GlobalIndices) and reads, from the memory-mapped file, exactly those: the values of a
// whole read at those indices, and 4 bytes (F32) per element, so that a rank reads about
// half of the file (norms are replicated: each rank reads them whole).
TEST_P(LlamaReferenceTest, TensorParallelRanksReadOnlyTheirSlices) {
  const TinyModel m = GetParam();
  const std::string dir = WriteFolder(m, RandomWeights(m, 31), m.model_type + "_slices");
  const absl::StatusOr<ResolvedConfig> config = LoadHfConfig(dir, kSeq);
  ASSERT_TRUE(config.ok()) << config.status();
  const absl::StatusOr<GlobalTensorMap> whole = ReadHf(dir, config->config());
  ASSERT_TRUE(whole.ok()) << whole.status();
  const ModelShape& shape = config->model_shape();
  ASSERT_EQ(shape.padded_vocab, m.vocab);  // no padding rows: every element is read
  const int64_t file_bytes = testing_util::F32DataBytes(RandomWeights(m, 31));
  const std::vector<int64_t> bytes =
      testing_util::ExpectSliceReadsMatchWholeRead(dir, *config, *whole, /*tp=*/2);
  int64_t both_ranks = 0;
  for (size_t rank = 0; rank < bytes.size(); ++rank) {
    EXPECT_LT(bytes[rank], file_bytes * 6 / 10) << "rank " << rank;
    RecordProperty(absl::StrCat("rank", rank, "_bytes_read"), absl::StrCat(bytes[rank]));
    both_ranks += bytes[rank];
  }
  RecordProperty("file_bytes", absl::StrCat(file_bytes));
  EXPECT_GT(both_ranks, file_bytes);  // the replicated norms, read by both
}

INSTANTIATE_TEST_SUITE_P(Architectures, LlamaReferenceTest, ::testing::ValuesIn(Models()),
                         [](const ::testing::TestParamInfo<TinyModel>& test) {
                           return test.param.model_type;
                         });

TEST(LlamaConfigTest, AFlagThatContradictsTheFileNamesBoth) {
  const TinyModel m = Models()[0];
  const std::string dir = WriteFolder(m, RandomWeights(m, 1), "contradiction");
  const absl::StatusOr<ResolvedConfig> config =
      LoadHfConfig(dir, kSeq, {"--num-layers", "3", "--normalization", "LayerNorm", "--num-layers", "3"});
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(),
              AllOf(HasSubstr("--num-layers 3 contradicts num_hidden_layers = 2 in"),
                    HasSubstr("--normalization LayerNorm contradicts architectures")));
  // Agreeing flags are fine.
  EXPECT_TRUE(LoadHfConfig(dir, kSeq, {"--num-layers", "2", "--swiglu"}).ok());
}

TEST(LlamaConfigTest, UnsupportedFeaturesAreNamed) {
  const TinyModel m = Models()[1];  // Mistral
  const std::string dir = FreshDir("unsupported");
  std::string json = ConfigJson(m);
  json.back() = ',';
  json += " \"rope_scaling\": {\"rope_type\": \"dynamic\", \"factor\": 8.0}}";
  const std::string path = JoinPath(dir, kHfConfigFile);
  ASSERT_TRUE(WriteFileAtomically(path, json, path + ".tmp", Durability::kVisible).ok());
  const absl::StatusOr<ResolvedConfig> config = LoadHfConfig(dir, kSeq);
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(),
              HasSubstr("rope_scaling of type \"dynamic\" is not implemented"));
}

}  // namespace
}  // namespace conveyor
