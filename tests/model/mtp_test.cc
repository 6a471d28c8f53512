// Multi-token prediction (model/mtp_block.h) against an independent float64 reference
// written from the definition (DeepSeek-V3 report §2.2, Megatron's
// multi_token_prediction.py): each depth's loss and the training objective for D = 1 and
// D = 2 under a loss mask; the gradients against finite differences; and tensor (with and
// without sequence parallelism) and pipeline layouts against one rank.
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/gpt_model.h"
#include "model/model_groups.h"
#include "runtime/cpu/cpu_ops.h"
#include "tests/model/grad_check.h"
#include "tests/model/test_shapes.h"
#include "tests/util/in_process_world.h"

namespace conveyor {
namespace {

using Matrix = std::vector<double>;  // row-major

constexpr int64_t kBatch = 2;

// A Llama-like tiny model (RMSNorm, SwiGLU, no bias, untied output layer) without
// positions, so the reference needs no RoPE; grouped heads (2 query heads per group).
ModelShape ReferenceShape(int64_t depths, float lambda) {
  ModelShape s = testing_util::TinyShape();
  s.no_positions = true;
  s.rms_norm = true;
  s.swiglu = true;
  s.linear_bias = false;
  s.tied_embeddings = false;
  s.mtp_layers = depths;
  s.mtp_loss_scaling = lambda;
  return s;
}

struct Batch {
  std::vector<int32_t> tokens, labels;
  DocumentMasks documents;
  MicroBatchContext Mb(const ModelShape& s) const {
    MicroBatchContext mb{/*iteration=*/2, /*first_sample=*/4, kBatch, s.seq};
    mb.documents = &documents;
    return mb;
  }
};

// Tokens and labels that differ, and a loss mask with holes (as --eod-mask-loss makes).
Batch MakeBatch(const ModelShape& s) {
  Batch b;
  const int64_t n = kBatch * s.seq;
  for (int64_t i = 0; i < n; ++i) {
    b.tokens.push_back(static_cast<int32_t>((i * 11 + 3) % s.padded_vocab));
    b.labels.push_back(static_cast<int32_t>((i * 7 + 5) % s.padded_vocab));
    b.documents.loss_mask.push_back(i % 5 == 2 ? 0.0f : 1.0f);
  }
  return b;
}

class Reference {
 public:
  Reference(GptModel& model, const ModelShape& s) : model_(model), s_(s) {}

  // Each entry: the masked mean cross-entropy of depth k (0: the model's own loss).
  std::vector<double> Losses(const Batch& b) const {
    Matrix x = Embed(b.tokens);
    for (int64_t l = 0; l < s_.num_layers; ++l) x = Layer(x, "layers." + std::to_string(l));
    Matrix h = RmsNorm(x, "final_norm");
    std::vector<double> losses{MeanCrossEntropy(h, b.labels, b.documents.loss_mask)};
    for (int64_t k = 1; k <= s_.mtp_layers; ++k) {
      const std::string name = "layers." + std::to_string(s_.num_layers + k - 1);
      const Matrix e = RmsNorm(Embed(Roll(b.tokens, k)), name + ".enorm");
      const Matrix hn = RmsNorm(h, name + ".hnorm");
      Matrix cat(Rows() * 2 * s_.hidden);
      for (int64_t r = 0; r < Rows(); ++r) {
        for (int64_t c = 0; c < s_.hidden; ++c) {
          cat[r * 2 * s_.hidden + c] = e[r * s_.hidden + c];  // the embedding first
          cat[r * 2 * s_.hidden + s_.hidden + c] = hn[r * s_.hidden + c];
        }
      }
      h = RmsNorm(Layer(Linear(cat, name + ".eh_proj.weight"), name), name + ".final_norm");
      losses.push_back(MeanCrossEntropy(h, Roll(b.labels, k), Roll(b.documents.loss_mask, k)));
    }
    return losses;
  }

 private:
  int64_t Rows() const { return kBatch * s_.seq; }
  std::vector<double> P(const std::string& name) const {
    const Parameter* p = model_.parameters().Find(name);
    EXPECT_NE(p, nullptr) << name;
    return std::vector<double>(p->value.data(), p->value.data() + p->value.numel());
  }
  // Left by k within each sample, zero-filled.
  template <typename T>
  std::vector<T> Roll(const std::vector<T>& a, int64_t k) const {
    std::vector<T> r(a.size(), T(0));
    for (int64_t b = 0; b < kBatch; ++b) {
      for (int64_t i = 0; i + k < s_.seq; ++i) r[b * s_.seq + i] = a[b * s_.seq + i + k];
    }
    return r;
  }
  Matrix Embed(const std::vector<int32_t>& tokens) const {
    const std::vector<double> table = P("embedding.word_embeddings.weight");
    Matrix x(Rows() * s_.hidden);
    for (int64_t r = 0; r < Rows(); ++r) {
      for (int64_t c = 0; c < s_.hidden; ++c)
        x[r * s_.hidden + c] = table[tokens[r] * s_.hidden + c];
    }
    return x;
  }
  Matrix RmsNorm(const Matrix& x, const std::string& name) const {
    const std::vector<double> g = P(name + ".weight");
    Matrix y(x.size());
    for (int64_t r = 0; r < Rows(); ++r) {
      double ms = 0;
      for (int64_t c = 0; c < s_.hidden; ++c) ms += x[r * s_.hidden + c] * x[r * s_.hidden + c];
      const double rstd = 1.0 / std::sqrt(ms / static_cast<double>(s_.hidden) + s_.norm_epsilon);
      for (int64_t c = 0; c < s_.hidden; ++c)
        y[r * s_.hidden + c] = x[r * s_.hidden + c] * rstd * g[c];
    }
    return y;
  }
  // x [rows, in] W^T with W [out, in].
  Matrix Linear(const Matrix& x, const std::string& name) const {
    const std::vector<double> w = P(name);
    const int64_t in = static_cast<int64_t>(x.size()) / Rows();
    const int64_t out = static_cast<int64_t>(w.size()) / in;
    Matrix y(Rows() * out, 0.0);
    for (int64_t r = 0; r < Rows(); ++r) {
      for (int64_t o = 0; o < out; ++o) {
        for (int64_t i = 0; i < in; ++i) y[r * out + o] += x[r * in + i] * w[o * in + i];
      }
    }
    return y;
  }
  // Causal attention per sample; qkv's columns are, per query group, its query heads,
  // its key head and its value head (Megatron's fused layout).
  Matrix Attention(const Matrix& qkv) const {
    const int64_t d = s_.head_dim, hpg = s_.heads_per_group(), width = s_.qkv_width();
    Matrix ctx(Rows() * s_.heads * d, 0.0);
    for (int64_t b = 0; b < kBatch; ++b) {
      for (int64_t head = 0; head < s_.heads; ++head) {
        const int64_t group = head / hpg, base = group * (hpg + 2) * d;
        const int64_t q = base + (head % hpg) * d, k = base + hpg * d, v = k + d;
        for (int64_t i = 0; i < s_.seq; ++i) {
          const int64_t ri = b * s_.seq + i;
          std::vector<double> score(i + 1);
          double max = -1e300, sum = 0;
          for (int64_t j = 0; j <= i; ++j) {
            double dot = 0;
            for (int64_t c = 0; c < d; ++c)
              dot += qkv[ri * width + q + c] * qkv[(b * s_.seq + j) * width + k + c];
            score[j] = dot / std::sqrt(static_cast<double>(d));
            max = std::max(max, score[j]);
          }
          for (double& x : score) sum += (x = std::exp(x - max));
          for (int64_t j = 0; j <= i; ++j) {
            for (int64_t c = 0; c < d; ++c) {
              ctx[ri * s_.heads * d + head * d + c] +=
                  score[j] / sum * qkv[(b * s_.seq + j) * width + v + c];
            }
          }
        }
      }
    }
    return ctx;
  }
  Matrix Layer(const Matrix& x, const std::string& name) const {
    const Matrix attn =
        Linear(Attention(Linear(RmsNorm(x, name + ".input_norm"), name + ".attention.qkv.weight")),
               name + ".attention.proj.weight");
    Matrix x1 = x;
    for (size_t i = 0; i < x1.size(); ++i) x1[i] += attn[i];
    const Matrix fc1 = Linear(RmsNorm(x1, name + ".post_attention_norm"), name + ".mlp.fc1.weight");
    const int64_t f = s_.ffn_hidden;
    Matrix act(Rows() * f);
    for (int64_t r = 0; r < Rows(); ++r) {
      for (int64_t j = 0; j < f; ++j) {
        const double a = fc1[r * 2 * f + j], up = fc1[r * 2 * f + f + j];
        act[r * f + j] = a / (1.0 + std::exp(-a)) * up;  // silu(gate) * up
      }
    }
    const Matrix mlp = Linear(act, name + ".mlp.fc2.weight");
    for (size_t i = 0; i < x1.size(); ++i) x1[i] += mlp[i];
    return x1;
  }
  double MeanCrossEntropy(const Matrix& h, const std::vector<int32_t>& labels,
                          const std::vector<float>& mask) const {
    const Matrix logits = Linear(h, "output_layer.weight");
    const int64_t v = s_.padded_vocab;
    double sum = 0;
    int64_t count = 0;
    for (int64_t r = 0; r < Rows(); ++r) {
      if (mask[r] == 0.0f) continue;
      double max = -1e300, se = 0;
      for (int64_t j = 0; j < v; ++j) max = std::max(max, logits[r * v + j]);
      for (int64_t j = 0; j < v; ++j) se += std::exp(logits[r * v + j] - max);
      sum += max + std::log(se) - logits[r * v + labels[r]];
      ++count;
    }
    return sum / static_cast<double>(count);
  }

  GptModel& model_;
  ModelShape s_;
};

class MtpReferenceTest : public ::testing::TestWithParam<int64_t> {};

TEST_P(MtpReferenceTest, EachDepthsLossAndTheObjectiveMatchTheFloat64Reference) {
  const float lambda = 0.3f;
  const ModelShape s = ReferenceShape(GetParam(), lambda);
  const TensorParallel one_rank;
  GptModel model(&CpuOps::Get(), s, /*seed=*/11, &one_rank);
  const Batch b = MakeBatch(s);
  const MicroBatchContext mb = b.Mb(s);
  const std::vector<double> want = Reference(model, s).Losses(b);
  ASSERT_EQ(static_cast<int64_t>(want.size()), s.mtp_layers + 1);

  GptStash stash;
  absl::StatusOr<Tensor> x = model.EmbeddingForward(mb, b.tokens.data(), &stash.embedding);
  ASSERT_TRUE(x.ok()) << x.status();
  stash.layers.resize(model.num_local_layers());
  for (int64_t i = 0; i < model.num_local_layers(); ++i) {
    x = model.layer(i).Forward(*x, mb, &stash.layers[i]);
    ASSERT_TRUE(x.ok()) << x.status();
  }
  const absl::StatusOr<HeadLoss> got =
      model.HeadForward(mb, *x, b.tokens.data(), b.labels.data(), &stash.head);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_NEAR(got->lm.Mean(), want[0], 2e-5 * want[0]);
  ASSERT_EQ(static_cast<int64_t>(got->mtp.size()), s.mtp_layers);
  for (int64_t k = 1; k <= s.mtp_layers; ++k) {
    EXPECT_NEAR(got->mtp[k - 1], want[k], 2e-5 * want[k]) << "depth " << k;
    // The depths see other tokens than the model: their losses differ from its.
    EXPECT_GT(std::fabs(want[k] - want[0]), 1e-3);
  }

  double objective = want[0];
  for (int64_t k = 1; k <= s.mtp_layers; ++k) objective += lambda / s.mtp_layers * want[k];
  GptStash full;
  const absl::StatusOr<float> loss = model.Forward(mb, b.tokens.data(), b.labels.data(), &full);
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_NEAR(*loss, objective, 2e-5 * objective);
}

INSTANTIATE_TEST_SUITE_P(Depths, MtpReferenceTest, ::testing::Values(1, 2));

// Every MTP option the model takes, with D = 2 (every depth's gradient reaches h0
// through the next depth).
std::vector<testing_util::ShapeVariant> MtpVariants() {
  std::vector<testing_util::ShapeVariant> v;
  ModelShape s = ReferenceShape(2, 0.3f);
  v.push_back({"llama_like", s});
  s.rope = true;
  s.no_positions = false;
  s.hidden_dropout = 0.2f;
  s.attention_dropout = 0.1f;
  v.push_back({"rope_dropout", s});
  s = ReferenceShape(2, 0.3f);
  s.rms_norm = false;
  s.swiglu = false;
  s.linear_bias = true;
  s.tied_embeddings = true;
  v.push_back({"layernorm_gelu_tied", s});
  s = ReferenceShape(1, 0.5f);
  s.moe.router.experts = 4;
  // Every expert chosen, so that no difference step changes the routing; no auxiliary
  // loss, which the returned loss leaves out.
  s.moe.router.topk = 4;
  s.moe.ffn_hidden = 12;
  s.moe.layers = {false, true};  // the depths' layers are MoE, like the last
  v.push_back({"moe_last_layer", s});
  return v;
}

class MtpGradTest : public ::testing::TestWithParam<testing_util::ShapeVariant> {};

TEST_P(MtpGradTest, ParameterGradientsMatchFiniteDifferences) {
  const ModelShape s = GetParam().shape;
  const TensorParallel one_rank;
  GptModel model(&CpuOps::Get(), s, /*seed=*/7, &one_rank);
  ASSERT_NE(model.mtp(), nullptr);
  EXPECT_EQ(model.mtp()->layer(0).moe() != nullptr, s.moe.experts() > 0);
  const Batch b = MakeBatch(s);
  const MicroBatchContext mb = b.Mb(s);
  auto loss = [&]() {
    GptStash stash;
    return static_cast<double>(*model.Forward(mb, b.tokens.data(), b.labels.data(), &stash));
  };
  model.parameters().ZeroGrads();
  GptStash stash;
  ASSERT_TRUE(model.Forward(mb, b.tokens.data(), b.labels.data(), &stash).ok());
  ASSERT_TRUE(model.Backward(mb, /*loss_scale=*/1.0f, &stash).ok());
  const std::vector<testing_util::GradTarget> targets =
      testing_util::ParameterTargets(model.parameters().parameters());
  for (const char* name : {"layers.2.eh_proj.weight", "layers.2.enorm.weight"}) {
    const Parameter* p = model.parameters().Find(name);
    ASSERT_NE(p, nullptr) << name;
    float max = 0;
    for (int64_t i = 0; i < p->grad.numel(); ++i) max = std::max(max, std::fabs(p->grad.data()[i]));
    EXPECT_GT(max, 1e-4f) << name;
  }
  for (const std::string& problem : testing_util::CheckGradients(loss, targets)) {
    ADD_FAILURE() << GetParam().name << ": " << problem;
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, MtpGradTest, ::testing::ValuesIn(MtpVariants()),
                         [](const ::testing::TestParamInfo<testing_util::ShapeVariant>& test) {
                           return test.param.name;
                         });

// Global gradients by parameter name, summed over `models` (ranks or stages): a
// sharded parameter's parts land at their global places; a replicated one's copies add
// up when each rank saw only part of the tokens or heads (or is a stage's own copy),
// else they are equal and the first is taken.
using GlobalGrads = std::map<std::string, std::vector<double>>;
void AddGrads(GptModel& model, bool first, bool copies_add, GlobalGrads* out) {
  for (Parameter* p : model.parameters().parameters()) {
    int64_t numel = 1;
    for (int64_t d : p->global_shape) numel *= d;
    std::vector<double>& g = (*out)[p->name];
    g.resize(numel, 0.0);
    const bool adds = copies_add || p->sequence_parallel || p->partial_over_heads;
    if (p->sharding.replicated() && !adds && !first) continue;
    const std::vector<int64_t> index = GlobalIndices(*p);
    for (size_t i = 0; i < index.size(); ++i) g[index[i]] += p->grad.data()[i];
  }
}

struct RunResult {
  double loss = 0;
  GlobalGrads grads;
};

RunResult OneRank(const ModelShape& s, const Batch& b) {
  const TensorParallel one_rank;
  GptModel model(&CpuOps::Get(), s, 7, &one_rank);
  const MicroBatchContext mb = b.Mb(s);
  GptStash stash;
  RunResult r;
  r.loss = *model.Forward(mb, b.tokens.data(), b.labels.data(), &stash);
  EXPECT_TRUE(model.Backward(mb, 1.0f, &stash).ok());
  AddGrads(model, true, false, &r.grads);
  return r;
}

void ExpectSame(const RunResult& got, const RunResult& want) {
  EXPECT_NEAR(got.loss, want.loss, 1e-5 * want.loss);
  ASSERT_EQ(got.grads.size(), want.grads.size());
  for (const auto& [name, g] : want.grads) {
    const std::vector<double>& h = got.grads.at(name);
    ASSERT_EQ(h.size(), g.size()) << name;
    for (size_t i = 0; i < g.size(); ++i) {
      ASSERT_NEAR(h[i], g[i], 1e-6 + 1e-4 * std::fabs(g[i])) << name << "[" << i << "]";
    }
  }
}

class MtpTensorParallelTest : public ::testing::TestWithParam<bool> {};

TEST_P(MtpTensorParallelTest, TwoRanksEqualOne) {
  ModelShape s = ReferenceShape(2, 0.3f);
  s.hidden_dropout = 0.1f;
  const Batch b = MakeBatch(s);
  const RunResult want = OneRank(s, b);
  testing_util::InProcessWorld world(2);
  std::vector<RunResult> got(2);
  std::vector<std::unique_ptr<GptModel>> models(2);
  std::vector<SingleRankGroups> others(2);
  std::vector<std::unique_ptr<TensorParallel>> tps(2);
  const std::vector<absl::Status> statuses = world.Run([&](int rank, Communicator& comm) {
    ModelGroups groups = others[rank].groups();
    groups.tp = groups.etp = &comm;  // expert TP as large as TP is the TP group
    tps[rank] = std::make_unique<TensorParallel>(groups, /*sequence_parallel=*/GetParam());
    models[rank] = std::make_unique<GptModel>(&CpuOps::Get(), s, 7, tps[rank].get());
    const MicroBatchContext mb = b.Mb(s);
    GptStash stash;
    absl::StatusOr<float> loss =
        models[rank]->Forward(mb, b.tokens.data(), b.labels.data(), &stash);
    if (!loss.ok()) return loss.status();
    got[rank].loss = *loss;
    return models[rank]->Backward(mb, 1.0f, &stash);
  });
  for (const absl::Status& st : statuses) ASSERT_TRUE(st.ok()) << st;
  RunResult merged;
  merged.loss = got[0].loss;
  EXPECT_EQ(got[0].loss, got[1].loss);
  for (int r = 0; r < 2; ++r) AddGrads(*models[r], r == 0, false, &merged.grads);
  ExpectSame(merged, want);
}

INSTANTIATE_TEST_SUITE_P(SequenceParallel, MtpTensorParallelTest, ::testing::Bool());

// Two pipeline stages (layer 0 with the embedding | layer 1, the head and the depths,
// which hold their own copy of the word embedding): the same loss, and the stages'
// gradients (the copies' summed, as the embedding group sums them) equal one rank's.
TEST(MtpPipelineTest, TwoStagesEqualOne) {
  const ModelShape s = ReferenceShape(2, 0.3f);
  const Batch b = MakeBatch(s);
  const RunResult want = OneRank(s, b);
  const MicroBatchContext mb = b.Mb(s);
  const TensorParallel one_rank;
  GptModel first(&CpuOps::Get(), s, 7, &one_rank, {0, 1, true, false});
  GptModel last(&CpuOps::Get(), s, 7, &one_rank, {1, 1, false, true});
  ASSERT_NE(last.parameters().Find(kWordEmbeddingName), nullptr);
  GptStash a, z;
  a.layers.resize(1);
  z.layers.resize(1);
  absl::StatusOr<Tensor> x = first.EmbeddingForward(mb, b.tokens.data(), &a.embedding);
  ASSERT_TRUE(x.ok());
  x = first.layer(0).Forward(*x, mb, &a.layers[0]);
  ASSERT_TRUE(x.ok());
  x = last.layer(0).Forward(*x, mb, &z.layers[0]);
  ASSERT_TRUE(x.ok());
  const absl::StatusOr<HeadLoss> loss =
      last.HeadForward(mb, *x, b.tokens.data(), b.labels.data(), &z.head);
  ASSERT_TRUE(loss.ok()) << loss.status();
  RunResult got;
  got.loss = loss->lm.Mean();
  for (const double depth : loss->mtp) got.loss += 0.3 / 2 * depth;
  absl::StatusOr<Tensor> d = last.HeadBackward(mb, LossWeighting{}, &z.head);
  ASSERT_TRUE(d.ok()) << d.status();
  d = last.layer(0).BackwardInput(*d, mb, &z.layers[0]);
  ASSERT_TRUE(d.ok());
  last.layer(0).BackwardWeight(&z.layers[0]);
  d = first.layer(0).BackwardInput(*d, mb, &a.layers[0]);
  ASSERT_TRUE(d.ok());
  first.layer(0).BackwardWeight(&a.layers[0]);
  ASSERT_TRUE(first.EmbeddingBackward(mb, *d, &a.embedding).ok());
  AddGrads(first, true, true, &got.grads);
  AddGrads(last, false, true, &got.grads);
  ExpectSame(got, want);
}

}  // namespace
}  // namespace conveyor
