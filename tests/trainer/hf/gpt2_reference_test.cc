// GPT2LMHeadModel folders against modeling_gpt2.py's forward pass written out in
// double (tests/trainer/hf/hf_reference.h): a tiny random GPT-2 in HF's layout
// (Conv1D weights [in, out], fused c_attn columns [Q | K | V], learned positions,
// tied embeddings, gelu_new), imported through --load-hf's path; Conveyor's loss and
// logits must match within 1e-5 relative.
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/atomic_file.h"
#include "gtest/gtest.h"
#include "model/gpt_model.h"
#include "model/model_shape.h"
#include "runtime/cpu/cpu_ops.h"
#include "tests/trainer/hf/hf_reference.h"
#include "tests/trainer/hf/llama_checkpoint.h"
#include "tests/trainer/hf/slice_reads.h"
#include "tests/util/test_dirs.h"
#include "trainer/checkpoint/file_io.h"
#include "trainer/checkpoint/index_runs.h"
#include "trainer/config/flags.h"
#include "trainer/config/resolved_config.h"
#include "trainer/hf/export.h"
#include "trainer/hf/hf_folder.h"

namespace conveyor {
namespace {

using testing_util::AddInto;
using testing_util::CausalAttention;
using testing_util::Conv1D;
using testing_util::FreshDir;
using testing_util::LayerNorm;
using testing_util::LogitsAndLoss;
using testing_util::Matrix;
using testing_util::Reference;
using testing_util::Rows;

constexpr int64_t kLayers = 2, kHidden = 16, kHeads = 4, kVocab = 50, kPositions = 16, kSeq = 8;
constexpr double kEps = 1e-5;

HfTensorMap RandomGpt2(uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.3f);
  HfTensorMap t;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, float mean) {
    HfTensor& tensor = t["transformer." + name];
    tensor.shape = shape;
    tensor.data.resize(NumElements(shape));
    for (float& v : tensor.data) v = mean + normal(rng);
  };
  add("wte.weight", {kVocab, kHidden}, 0);
  add("wpe.weight", {kPositions, kHidden}, 0);
  add("ln_f.weight", {kHidden}, 1);
  add("ln_f.bias", {kHidden}, 0);
  for (int64_t i = 0; i < kLayers; ++i) {
    const std::string l = absl::StrCat("h.", i, ".");
    add(l + "ln_1.weight", {kHidden}, 1);
    add(l + "ln_1.bias", {kHidden}, 0);
    add(l + "attn.c_attn.weight", {kHidden, 3 * kHidden}, 0);
    add(l + "attn.c_attn.bias", {3 * kHidden}, 0);
    add(l + "attn.c_proj.weight", {kHidden, kHidden}, 0);
    add(l + "attn.c_proj.bias", {kHidden}, 0);
    add(l + "ln_2.weight", {kHidden}, 1);
    add(l + "ln_2.bias", {kHidden}, 0);
    add(l + "mlp.c_fc.weight", {kHidden, 4 * kHidden}, 0);
    add(l + "mlp.c_fc.bias", {4 * kHidden}, 0);
    add(l + "mlp.c_proj.weight", {4 * kHidden, kHidden}, 0);
    add(l + "mlp.c_proj.bias", {kHidden}, 0);
  }
  return t;
}

// modeling_gpt2.py: x = wte[ids] + wpe[pos]; per block x += attn(ln_1(x)),
// x += mlp(ln_2(x)) with gelu_new; logits = ln_f(x) wte^T.
Reference Gpt2Forward(const HfTensorMap& t, const std::vector<int32_t>& tokens,
                      const std::vector<int32_t>& labels) {
  auto w = [&](const std::string& name) -> const HfTensor& { return t.at("transformer." + name); };
  const int64_t d = kHidden / kHeads;
  std::vector<int32_t> positions(tokens.size());
  for (size_t p = 0; p < positions.size(); ++p) positions[p] = int32_t(p);
  Matrix x = Rows(w("wte.weight"), tokens);
  AddInto(Rows(w("wpe.weight"), positions), &x);
  for (int64_t layer = 0; layer < kLayers; ++layer) {
    const std::string l = absl::StrCat("h.", layer, ".");
    const Matrix qkv = Conv1D(LayerNorm(x, w(l + "ln_1.weight"), w(l + "ln_1.bias"), kEps),
                              w(l + "attn.c_attn.weight"), w(l + "attn.c_attn.bias"));
    Matrix q(qkv.size()), k(qkv.size()), v(qkv.size());  // split(n_embd, dim=2)
    for (size_t p = 0; p < qkv.size(); ++p) {
      q[p].assign(qkv[p].begin(), qkv[p].begin() + kHidden);
      k[p].assign(qkv[p].begin() + kHidden, qkv[p].begin() + 2 * kHidden);
      v[p].assign(qkv[p].begin() + 2 * kHidden, qkv[p].end());
    }
    AddInto(Conv1D(CausalAttention(q, k, v, kHeads, kHeads, d), w(l + "attn.c_proj.weight"),
                   w(l + "attn.c_proj.bias")),
            &x);
    Matrix h = Conv1D(LayerNorm(x, w(l + "ln_2.weight"), w(l + "ln_2.bias"), kEps),
                      w(l + "mlp.c_fc.weight"), w(l + "mlp.c_fc.bias"));
    for (auto& row : h) {
      for (double& z : row) {
        z = 0.5 * z * (1 + std::tanh(std::sqrt(2 / M_PI) * (z + 0.044715 * z * z * z)));
      }
    }
    AddInto(Conv1D(h, w(l + "mlp.c_proj.weight"), w(l + "mlp.c_proj.bias")), &x);
  }
  return LogitsAndLoss(LayerNorm(x, w("ln_f.weight"), w("ln_f.bias"), kEps), w("wte.weight"),
                       labels);
}

// A GPT2LMHeadModel folder of `weights` named `name`.
std::string WriteGpt2Folder(const HfTensorMap& weights, const std::string& name) {
  const std::string dir = FreshDir(name);
  EXPECT_TRUE(WriteHfWeights(dir, weights, 5000000000).ok());
  const std::string path = JoinPath(dir, kHfConfigFile);
  const std::string json = absl::StrCat(
      "{\"architectures\": [\"GPT2LMHeadModel\"], \"model_type\": \"gpt2\", \"n_layer\": ", kLayers,
      ", \"n_embd\": ", kHidden, ", \"n_head\": ", kHeads, ", \"vocab_size\": ", kVocab,
      ", \"n_positions\": ", kPositions,
      ", \"n_inner\": null, \"activation_function\": \"gelu_new\", \"layer_norm_epsilon\": 1e-05}");
  EXPECT_TRUE(WriteFileAtomically(path, json, path + ".tmp", Durability::kVisible).ok());
  return dir;
}

// --load-hf's configuration of the folder: GPT-2's config.json only checks the flags;
// an unpadded vocabulary keeps HF's logits.
absl::StatusOr<ResolvedConfig> Gpt2ConfigFor(const std::string& dir) {
  absl::StatusOr<Config> parsed = ParseFlags({"--load-hf",
                                              dir,
                                              "--mock-data",
                                              "--num-layers",
                                              absl::StrCat(kLayers),
                                              "--hidden-size",
                                              absl::StrCat(kHidden),
                                              "--num-attention-heads",
                                              absl::StrCat(kHeads),
                                              "--vocab-size",
                                              absl::StrCat(kVocab),
                                              "--seq-length",
                                              absl::StrCat(kSeq),
                                              "--max-position-embeddings",
                                              absl::StrCat(kPositions),
                                              "--make-vocab-size-divisible-by",
                                              "1",
                                              "--hidden-dropout",
                                              "0",
                                              "--attention-dropout",
                                              "0"});
  if (!parsed.ok()) return parsed.status();
  if (absl::Status s = ApplyHfConfig(dir, &*parsed); !s.ok()) return s;
  return ResolvedConfig::Resolve(*parsed, 1);
}

TEST(Gpt2ReferenceTest, FirstStepLossAndLogitsMatchTheReference) {
  const HfTensorMap weights = RandomGpt2(29);
  const std::string dir = WriteGpt2Folder(weights, "gpt2");
  const absl::StatusOr<ResolvedConfig> config = Gpt2ConfigFor(dir);
  ASSERT_TRUE(config.ok()) << config.status();
  const absl::StatusOr<GlobalTensorMap> imported = ReadHf(dir, config->config());
  ASSERT_TRUE(imported.ok()) << imported.status();

  const ModelShape& shape = config->model_shape();
  ASSERT_EQ(shape.padded_vocab, kVocab);
  const TensorParallel one_rank;
  GptModel model(&CpuOps::Get(), shape, /*seed=*/1, &one_rank);
  testing_util::CopyImportedParameters(*imported, &model);
  std::vector<int32_t> tokens(kSeq), labels(kSeq);
  for (int64_t i = 0; i < kSeq; ++i) {
    tokens[i] = int32_t((i * 17 + 3) % kVocab);
    labels[i] = int32_t((i * 11 + 1) % kVocab);
  }
  GptStash stash;
  const absl::StatusOr<float> loss = model.Forward(
      MicroBatchContext{1, 0, 1, kSeq, /*training=*/false}, tokens.data(), labels.data(), &stash);
  ASSERT_TRUE(loss.ok()) << loss.status();

  const Reference ref = Gpt2Forward(weights, tokens, labels);
  EXPECT_NEAR(*loss, ref.loss, 1e-5 * ref.loss);
  const double worst =
      testing_util::WorstRelativeLogitError(ref.logits, stash.head.output.logits.data(), kVocab);
  EXPECT_LT(worst, 1e-5) << "largest relative logit error";
  RecordProperty("largest_relative_logit_error", absl::StrCat(worst));
  RecordProperty("relative_loss_error", absl::StrCat(std::fabs(*loss - ref.loss) / ref.loss));
}

// --load-hf under TP 2: each rank reads, from the memory-mapped file, only the elements
// its parameters keep (Conv1D weights are transposed, so column slices come element by
// element): the whole read's values at those indices, 4 bytes (F32) per element.
TEST(Gpt2ReferenceTest, TensorParallelRanksReadOnlyTheirSlices) {
  const HfTensorMap weights = RandomGpt2(37);
  const std::string dir = WriteGpt2Folder(weights, "gpt2_slices");
  const absl::StatusOr<ResolvedConfig> config = Gpt2ConfigFor(dir);
  ASSERT_TRUE(config.ok()) << config.status();
  const absl::StatusOr<GlobalTensorMap> whole = ReadHf(dir, config->config());
  ASSERT_TRUE(whole.ok()) << whole.status();
  const int64_t file_bytes = testing_util::F32DataBytes(weights);
  const std::vector<int64_t> bytes =
      testing_util::ExpectSliceReadsMatchWholeRead(dir, *config, *whole, /*tp=*/2);
  for (size_t rank = 0; rank < bytes.size(); ++rank) {
    EXPECT_LT(bytes[rank], file_bytes * 6 / 10) << "rank " << rank;
    RecordProperty(absl::StrCat("rank", rank, "_bytes_read"), absl::StrCat(bytes[rank]));
  }
  RecordProperty("file_bytes", absl::StrCat(file_bytes));
}

}  // namespace
}  // namespace conveyor
