// Document masking in the model (--eod-mask-loss, --reset-position-ids,
// --calculate-per-token-loss): the masked loss and its gradient against finite
// differences and hand-summed token losses, Megatron's all-masked micro-batch, the
// per-token weighting of a step against weights computed here, and the reset
// positions against what learned positions and RoPE are by definition.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/document_masks.h"
#include "model/gpt_model.h"
#include "model/gpt_stage.h"
#include "runtime/cpu/cpu_ops.h"
#include "tests/model/grad_check.h"
#include "tests/model/test_shapes.h"

namespace conveyor {
namespace {

using testing_util::GradTarget;
using testing_util::TinyShape;

constexpr int32_t kEod = 5;

// Two samples of TinyShape's 6 tokens: an eod inside the first, two (one of them the
// first input) in the second.
struct Batch {
  MicroBatchContext context;  // without its documents: Mb() points them at `masks`
  std::vector<int32_t> tokens, labels;
  DocumentMasks masks;

  MicroBatchContext Mb() const {
    MicroBatchContext mb = context;
    mb.documents = &masks;
    return mb;
  }
};

Batch MaskedBatch(const ModelShape& shape) {
  Batch b;
  b.context = MicroBatchContext{/*iteration=*/2, /*first_sample=*/0, /*batch=*/2, shape.seq};
  b.tokens = {1, 2, kEod, 7, 8, 9, kEod, 3, 4, kEod, 6, 11};
  for (int64_t i = 0; i < b.context.tokens(); ++i) {
    b.labels.push_back(static_cast<int32_t>((i * 5 + 1) % shape.padded_vocab));
  }
  DocumentMasking masking;
  masking.eod = kEod;
  masking.eod_mask_loss = masking.reset_position_ids = true;
  b.masks = MakeDocumentMasks(b.tokens, b.context.batch, b.context.seq, masking);
  return b;
}

double Loss(GptModel& model, const Batch& b) {
  GptStash stash;
  return static_cast<double>(*model.Forward(b.Mb(), b.tokens.data(), b.labels.data(), &stash));
}

std::vector<GradTarget> Targets(GptModel& model) {
  return testing_util::ParameterTargets(model.parameters().parameters());
}

class MaskedLossGradTest : public ::testing::TestWithParam<std::string> {};

ModelShape ShapeNamed(const std::string& name) {
  ModelShape s = TinyShape();
  s.rope = name == "rope";
  return s;
}

TEST_P(MaskedLossGradTest, GradientsMatchFiniteDifferences) {
  const ModelShape shape = ShapeNamed(GetParam());
  const TensorParallel one_rank;
  GptModel model(&CpuOps::Get(), shape, /*seed=*/7, &one_rank);
  const Batch b = MaskedBatch(shape);
  model.parameters().ZeroGrads();
  GptStash stash;
  ASSERT_TRUE(model.Forward(b.Mb(), b.tokens.data(), b.labels.data(), &stash).ok());
  ASSERT_TRUE(model.Backward(b.Mb(), /*loss_scale=*/1.0f, &stash).ok());
  const std::vector<GradTarget> targets = Targets(model);
  EXPECT_GT(testing_util::MaxAbsGradient(targets), 1e-2f);
  for (const std::string& problem :
       testing_util::CheckGradients([&] { return Loss(model, b); }, targets)) {
    ADD_FAILURE() << GetParam() << ": " << problem;
  }
}

TEST_P(MaskedLossGradTest, LossIsTheMeanOfTheUnmaskedTokensLosses) {
  const ModelShape shape = ShapeNamed(GetParam());
  const TensorParallel one_rank;
  GptModel model(&CpuOps::Get(), shape, /*seed=*/7, &one_rank);
  Batch b = MaskedBatch(shape);
  const std::vector<float> mask = b.masks.loss_mask;
  // Each token's own loss: a mask keeping that token alone.
  double sum = 0.0;
  int kept = 0;
  for (size_t t = 0; t < mask.size(); ++t) {
    if (mask[t] == 0.0f) continue;
    b.masks.loss_mask.assign(mask.size(), 0.0f);
    b.masks.loss_mask[t] = 1.0f;
    sum += Loss(model, b);
    ++kept;
  }
  ASSERT_EQ(kept, 9);  // 12 tokens, 3 eods
  b.masks.loss_mask = mask;
  EXPECT_NEAR(Loss(model, b), sum / kept, 1e-5);
}

// Megatron divides by max(unmasked tokens, 1): a micro-batch of eods only has loss 0
// and leaves every gradient 0, not NaN.
TEST_P(MaskedLossGradTest, AllMaskedMicroBatchGivesZeroLossAndGradient) {
  const ModelShape shape = ShapeNamed(GetParam());
  const TensorParallel one_rank;
  GptModel model(&CpuOps::Get(), shape, /*seed=*/7, &one_rank);
  Batch b = MaskedBatch(shape);
  b.masks.loss_mask.assign(b.masks.loss_mask.size(), 0.0f);
  model.parameters().ZeroGrads();
  GptStash stash;
  const absl::StatusOr<float> loss =
      model.Forward(b.Mb(), b.tokens.data(), b.labels.data(), &stash);
  ASSERT_TRUE(loss.ok());
  EXPECT_EQ(*loss, 0.0f);
  ASSERT_TRUE(model.Backward(b.Mb(), 1.0f, &stash).ok());
  for (const GradTarget& t : Targets(model)) {
    for (int64_t i = 0; i < t.size; ++i) ASSERT_EQ(t.grads[i], 0.0f) << t.name << "[" << i << "]";
  }
}

INSTANTIATE_TEST_SUITE_P(Positions, MaskedLossGradTest, ::testing::Values("learned", "rope"),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

// --calculate-per-token-loss: a step of two micro-batches holding 9 and 12 unmasked
// tokens. Megatron's gradient is that of (sum of kept token losses) / 21; a micro-batch
// contributes n / 21 of its mean's gradient, the reference here (the mean's gradient
// is the one checked against finite differences above). Without the flag each
// contributes 1/2 of its mean's.
TEST(PerTokenLossTest, StepGradientWeighsMicroBatchesByTheirTokens) {
  const ModelShape shape = TinyShape();
  std::vector<Batch> batches = {MaskedBatch(shape), MaskedBatch(shape)};
  batches[1].masks.loss_mask.assign(batches[1].masks.loss_mask.size(), 1.0f);
  batches[1].labels[0] = 17;  // a different micro-batch
  const int64_t n[2] = {9, 12};
  for (const bool per_token : {false, true}) {
    const TensorParallel one_rank;
    GptStage stage(&CpuOps::Get(), shape, /*seed=*/7, &one_rank, pipeline::PipelinePlace{},
                   {shape.num_layers});
    const LossWeighting weighting =
        per_token ? LossWeighting{1.0f / 21.0f, true} : LossWeighting{0.5f, false};
    stage.BeginStep(
        [&](int m) -> absl::StatusOr<MicroBatchInput> {
          MicroBatchInput in;
          in.documents = std::make_shared<const DocumentMasks>(batches[m].masks);
          in.context = batches[m].context;
          in.context.documents = in.documents.get();
          in.tokens = batches[m].tokens;
          in.labels = batches[m].labels;
          return in;
        },
        12, weighting);
    for (Parameter* p : stage.parameters()) p->grad.SetZero();
    for (int m = 0; m < 2; ++m) {
      ASSERT_TRUE(stage.Forward(m, 0, Tensor()).ok());
      ASSERT_TRUE(stage.Backward(m, 0, Tensor()).ok());
    }
    EXPECT_EQ(stage.loss().tokens, 21);

    GptModel reference(&CpuOps::Get(), shape, /*seed=*/7, &one_rank);
    reference.parameters().ZeroGrads();
    double loss_sum = 0.0;
    for (int m = 0; m < 2; ++m) {
      const float scale = per_token ? static_cast<float>(n[m]) / 21.0f : 0.5f;
      GptStash stash;
      const absl::StatusOr<float> mean = reference.Forward(
          batches[m].Mb(), batches[m].tokens.data(), batches[m].labels.data(), &stash);
      ASSERT_TRUE(mean.ok());
      loss_sum += static_cast<double>(*mean) * static_cast<double>(n[m]);
      ASSERT_TRUE(reference.Backward(batches[m].Mb(), scale, &stash).ok());
    }
    EXPECT_NEAR(stage.loss().sum, loss_sum, 1e-4);
    std::vector<Parameter*> got = stage.parameters();
    std::vector<Parameter*> want = reference.parameters().parameters();
    ASSERT_EQ(got.size(), want.size());
    float largest = 0.0f;
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i]->name, want[i]->name);
      for (int64_t e = 0; e < got[i]->grad.numel(); ++e) {
        const float w = want[i]->grad.data()[e];
        largest = std::max(largest, std::fabs(w));
        ASSERT_NEAR(got[i]->grad.data()[e], w, 1e-6f + 1e-4f * std::fabs(w))
            << (per_token ? "per-token " : "mean ") << got[i]->name << "[" << e << "]";
      }
    }
    EXPECT_GT(largest, 1e-2f);
  }
}

// Learned positions: the embedding output is word[token] + position[reset position],
// read here from the two tables.
TEST(ResetPositionsTest, LearnedPositionsAddTheResetPositionsRows) {
  const ModelShape shape = TinyShape();
  const TensorParallel one_rank;
  GptModel model(&CpuOps::Get(), shape, /*seed=*/7, &one_rank);
  const Batch b = MaskedBatch(shape);
  EmbeddingStash stash;
  const absl::StatusOr<Tensor> x = model.EmbeddingForward(b.Mb(), b.tokens.data(), &stash);
  ASSERT_TRUE(x.ok());
  const Parameter* word = model.parameters().Find(kWordEmbeddingName);
  const Parameter* position = model.parameters().Find("embedding.position_embeddings.weight");
  ASSERT_NE(word, nullptr);
  ASSERT_NE(position, nullptr);
  const std::vector<int32_t> want_positions = {0, 1, 2, 0, 1, 2, 0, 0, 1, 2, 0, 1};
  ASSERT_EQ(b.masks.position_ids, want_positions);
  for (int64_t t = 0; t < b.context.tokens(); ++t) {
    for (int64_t c = 0; c < shape.hidden; ++c) {
      const float want = word->value.data()[b.tokens[t] * shape.hidden + c] +
                         position->value.data()[want_positions[t] * shape.hidden + c];
      ASSERT_FLOAT_EQ(x->data()[t * shape.hidden + c], want) << "token " << t << " channel " << c;
    }
  }
}

// RoPE encodes relative positions only: every position of a sample moved by one
// leaves the loss unchanged, while positions that restart mid-sample change it. (The
// micro-batch is one token shorter than the model's sequence, so that the moved
// positions stay in the rotation table.)
TEST(ResetPositionsTest, RopeSeesThePerRowPositionsOfQueriesAndKeysAlike) {
  ModelShape shape = TinyShape();
  shape.rope = true;
  const TensorParallel one_rank;
  GptModel model(&CpuOps::Get(), shape, /*seed=*/7, &one_rank);
  Batch b;
  b.context = MicroBatchContext{1, 0, /*batch=*/1, shape.seq - 1};
  b.tokens = {4, 8, 15, 16, 23};
  b.labels = {8, 15, 16, 23, 30};
  const double plain = Loss(model, b);  // no masks: the index in the sample
  b.masks.position_ids = {1, 2, 3, 4, 5};
  EXPECT_NEAR(Loss(model, b), plain, 1e-5);
  b.masks.position_ids = {0, 1, 0, 1, 2};
  EXPECT_GT(std::fabs(Loss(model, b) - plain), 1e-3);
}

}  // namespace
}  // namespace conveyor
