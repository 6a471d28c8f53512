// --reset-position-ids with --reset-attention-mask make the documents of a packed
// sample independent: the second document's token losses (so its logits' softmax at
// the labels) equal those of the same tokens run as a sample of their own, for learned
// positions and RoPE. The reference is the model on the lone document, with no masks.
#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/document_masks.h"
#include "model/gpt_model.h"
#include "runtime/cpu/cpu_ops.h"
#include "tests/model/test_shapes.h"

namespace conveyor {
namespace {

constexpr int32_t kEod = 5;

// The loss of token `t` alone (a loss mask keeping only it).
double TokenLoss(GptModel& model, MicroBatchContext mb, DocumentMasks masks, int64_t t,
                 const std::vector<int32_t>& tokens, const std::vector<int32_t>& labels) {
  masks.loss_mask.assign(tokens.size(), 0.0f);
  masks.loss_mask[t] = 1.0f;
  mb.documents = &masks;
  GptStash stash;
  return static_cast<double>(*model.Forward(mb, tokens.data(), labels.data(), &stash));
}

class DocumentAttentionTest : public ::testing::TestWithParam<std::string> {};

TEST_P(DocumentAttentionTest, SecondDocumentEqualsItsOwnSample) {
  ModelShape shape = testing_util::TinyShape();
  shape.rope = GetParam() == "rope";
  shape.hidden_dropout = shape.attention_dropout = 0.0f;
  const TensorParallel one_rank;
  GptModel model(&CpuOps::Get(), shape, /*seed=*/7, &one_rank);
  // Document A = {1, 2, eod}, document B = {7, 8, 9}; labels of B as in its own sample.
  const std::vector<int32_t> packed_tokens = {1, 2, kEod, 7, 8, 9};
  const std::vector<int32_t> packed_labels = {2, kEod, 7, 8, 9, 12};
  const std::vector<int32_t> alone_tokens = {7, 8, 9};
  const std::vector<int32_t> alone_labels = {8, 9, 12};

  DocumentMasking masking;
  masking.eod = kEod;
  masking.reset_position_ids = masking.reset_attention_mask = true;
  const DocumentMasks packed = MakeDocumentMasks(packed_tokens, 1, shape.seq, masking);
  const MicroBatchContext packed_mb{1, 0, 1, shape.seq, /*training=*/false};
  const MicroBatchContext alone_mb{1, 0, 1, 3, /*training=*/false};
  for (int64_t j = 0; j < 3; ++j) {
    const double alone = TokenLoss(model, alone_mb, DocumentMasks(), j, alone_tokens, alone_labels);
    const double in_pack = TokenLoss(model, packed_mb, packed, 3 + j, packed_tokens, packed_labels);
    EXPECT_NEAR(in_pack, alone, 1e-5) << GetParam() << " token " << j << " of document B";
  }
  // Without the masks document B sees document A: the test can tell.
  const double crossing =
      TokenLoss(model, packed_mb, DocumentMasks(), 4, packed_tokens, packed_labels);
  EXPECT_GT(std::fabs(crossing -
                      TokenLoss(model, alone_mb, DocumentMasks(), 1, alone_tokens, alone_labels)),
            1e-4);
}

INSTANTIATE_TEST_SUITE_P(Positions, DocumentAttentionTest, ::testing::Values("learned", "rope"),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

}  // namespace
}  // namespace conveyor
