// The trainer's document masking: the eod token a run resolves and the errors that
// name the flag and the fix, the masks the feed attaches to each micro-batch, and
// --calculate-per-token-loss's token count, each against values written here.
#include "trainer/config/document_masking.h"

#include <memory>
#include <string>
#include <vector>

#include "data/tokenizers/simple_tokenizers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "trainer/micro_batch_feed.h"

namespace conveyor {
namespace {

using ::testing::HasSubstr;

Config WithFlags(bool eod_mask_loss, bool reset_position_ids) {
  Config c;
  c.mutable_model()->set_vocab_size(60);
  c.mutable_data()->set_eod_mask_loss(eod_mask_loss);
  c.mutable_data()->set_reset_position_ids(reset_position_ids);
  return c;
}

TEST(ResolveEodTokenTest, TakesTheTokenizersEod) {
  Config c = WithFlags(true, true);
  c.mutable_data()->set_tokenizer_type("NullTokenizer");
  const NullTokenizer tokenizer(59);  // eod 59
  ASSERT_TRUE(ResolveEodToken(&tokenizer, &c).ok());
  EXPECT_EQ(c.data().eod_token_id(), 59);
  const DocumentMasking masking = DocumentMaskingOf(c);
  EXPECT_EQ(masking.eod, 59);
  EXPECT_TRUE(masking.eod_mask_loss);
  EXPECT_TRUE(masking.reset_position_ids);
  EXPECT_FALSE(masking.reset_attention_mask);
  // Resolving the resolved config again changes nothing.
  EXPECT_TRUE(ResolveEodToken(&tokenizer, &c).ok());
}

TEST(ResolveEodTokenTest, RefusesAnEodOtherThanTheTokenizers) {
  Config c = WithFlags(true, false);
  c.mutable_data()->set_tokenizer_type("NullTokenizer");
  c.mutable_data()->set_eod_token_id(3);
  const NullTokenizer tokenizer(59);
  EXPECT_EQ(ResolveEodToken(&tokenizer, &c).message(),
            "--eod-token-id 3 is not the eod of --tokenizer-type NullTokenizer (59): documents "
            "end at the tokenizer's eod, as in Megatron; drop --eod-token-id");
}

TEST(ResolveEodTokenTest, MaskingWithoutAnEodNamesTheFlagAndTheFix) {
  Config c = WithFlags(false, true);
  EXPECT_EQ(ResolveEodToken(nullptr, &c).message(),
            "--reset-position-ids needs the token that ends a document: pass --tokenizer-type "
            "(its eod, as in Megatron) or, for data tokenized elsewhere, --eod-token-id");
  c.mutable_data()->set_eod_token_id(60);
  EXPECT_THAT(ResolveEodToken(nullptr, &c).message(),
              HasSubstr("--eod-token-id 60 is outside the vocabulary (60 ids)"));
  c.mutable_data()->set_eod_token_id(7);
  EXPECT_TRUE(ResolveEodToken(nullptr, &c).ok());
  // No masking flag: no eod needed.
  Config plain = WithFlags(false, false);
  EXPECT_TRUE(ResolveEodToken(nullptr, &plain).ok());
}

TEST(ResolveEodTokenTest, ResetAttentionMaskNeedsTheEodToo) {
  Config c = WithFlags(false, false);
  c.mutable_data()->set_reset_attention_mask(true);
  EXPECT_THAT(ResolveEodToken(nullptr, &c).message(), HasSubstr("--reset-attention-mask"));
  c.mutable_data()->set_eod_token_id(7);
  EXPECT_TRUE(ResolveEodToken(nullptr, &c).ok());
}

// Samples of 5 tokens (seq 4 inputs + 1), eod = 0, written out here.
class FixedSource : public SampleSource {
 public:
  int64_t size() const override { return static_cast<int64_t>(samples_.size()); }
  absl::StatusOr<std::vector<int32_t>> Sample(int64_t index) const override {
    return samples_[index % size()];
  }

 private:
  std::vector<std::vector<int32_t>> samples_ = {
      {1, 0, 2, 3, 0},  // inputs hold one eod (the label eod does not count)
      {0, 0, 4, 5, 6},  // two
      {7, 8, 9, 1, 2},  // none
      {3, 4, 0, 5, 0},  // one
  };
};

TEST(CountLossTokensTest, CountsTheGlobalBatchsNonEodInputs) {
  const FixedSource source;
  DocumentMasking masking;
  masking.eod = 0;
  masking.eod_mask_loss = true;
  // Samples 1..3: 4 + 4 + 4 inputs, 2 + 0 + 1 of them eod.
  absl::StatusOr<int64_t> count = CountLossTokens(source, 1, 3, 4, masking);
  ASSERT_TRUE(count.ok());
  EXPECT_EQ(*count, 9);
  masking.eod_mask_loss = false;  // every token counts
  EXPECT_EQ(*CountLossTokens(source, 1, 3, 4, masking), 12);
}

TEST(MicroBatchFeedTest, AttachesTheMasksOfItsSamples) {
  const FixedSource source;
  DocumentMasking masking;
  masking.eod = 0;
  masking.eod_mask_loss = masking.reset_position_ids = true;
  // DP rank 0 of 1, micro-batches of 2: micro-batch 0 holds samples 0 and 1.
  MicroBatchFeed feed = MakeMicroBatchFeed(source, 1, 0, true, 2, 4, 0, 1, masking);
  absl::StatusOr<MicroBatchInput> in = feed(0);
  ASSERT_TRUE(in.ok());
  ASSERT_NE(in->documents, nullptr);
  EXPECT_EQ(in->context.documents, in->documents.get());
  EXPECT_EQ(in->documents->loss_mask, (std::vector<float>{1, 0, 1, 1, 0, 0, 1, 1}));
  EXPECT_EQ(in->documents->position_ids, (std::vector<int32_t>{0, 1, 0, 1, 0, 0, 0, 1}));
  // Moving the input keeps its context pointing at its masks.
  const MicroBatchInput moved = std::move(*in);
  EXPECT_EQ(moved.context.documents, moved.documents.get());

  absl::StatusOr<MicroBatchInput> plain = MakeMicroBatchFeed(source, 1, 0, true, 2, 4, 0, 1)(0);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->context.documents, nullptr);
}

}  // namespace
}  // namespace conveyor
