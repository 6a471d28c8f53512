// The expert bias of auxiliary-loss-free balancing (model/expert_bias.h) against steps
// worked by hand from Megatron's rule bias += rate * sign(mean(tokens) - tokens):
// counting kept slots over micro-batches, ties with the mean (sign 0), counts summed
// over two data-parallel ranks, padding to capacity, and a skipped step.
#include "model/expert_bias.h"

#include <vector>

#include "gtest/gtest.h"

namespace conveyor {
namespace {

std::vector<float> Values(const ExpertBias& bias) {
  return {bias.values().begin(), bias.values().end()};
}
std::vector<float> Counts(const ExpertBias& bias) {
  return {bias.step_tokens().begin(), bias.step_tokens().end()};
}

TEST(ExpertBiasTest, StepsWorkedByHand) {
  ExpertBias bias("layers.0.mlp.router.expert_bias", 4);
  EXPECT_EQ(Values(bias), std::vector<float>({0, 0, 0, 0}));

  // Step 1, two micro-batches of top-2 routing. The first keeps every slot:
  // tokens (0,1), (0,2), (1,0) -> counts 3, 2, 1, 0.
  bias.CountMicroBatch(std::vector<int32_t>{0, 1, 0, 2, 1, 0}, {}, 0);
  EXPECT_EQ(Counts(bias), std::vector<float>({3, 2, 1, 0}));
  // The second drops its third slot: (3,0), (3,1) with keep 1,1,0,1 adds 3, 0, 1.
  bias.CountMicroBatch(std::vector<int32_t>{3, 0, 3, 1}, std::vector<uint8_t>{1, 1, 0, 1}, 0);
  EXPECT_EQ(Counts(bias), std::vector<float>({4, 3, 1, 1}));
  // mean 9/4 = 2.25: experts 0 and 1 are over it (-rate), 2 and 3 under (+rate).
  bias.Update(bias.step_tokens(), 0.125f);
  EXPECT_EQ(Values(bias), std::vector<float>({-0.125f, -0.125f, 0.125f, 0.125f}));
  EXPECT_EQ(Counts(bias), std::vector<float>({0, 0, 0, 0}));

  // Step 2, on two data-parallel ranks: rank 0 counts 4, 0, 1, 1 and rank 1 counts
  // 0, 3, 1, 2; their sum 4, 3, 2, 3 has mean 3, which experts 1 and 3 tie with
  // (sign 0: unchanged), expert 0 is over (-), expert 2 under (+). Rank 0's own counts
  // would move experts 1 and 3 instead.
  ExpertBias rank1("layers.0.mlp.router.expert_bias", 4);
  bias.CountMicroBatch(std::vector<int32_t>{0, 0, 0, 0, 2, 3}, {}, 0);
  rank1.CountMicroBatch(std::vector<int32_t>{1, 1, 1, 2, 3, 3}, {}, 0);
  std::vector<float> summed = Counts(bias);
  for (int e = 0; e < 4; ++e) summed[e] += Counts(rank1)[e];
  EXPECT_EQ(summed, std::vector<float>({4, 3, 2, 3}));
  bias.Update(summed, 0.125f);
  EXPECT_EQ(Values(bias), std::vector<float>({-0.25f, -0.125f, 0.25f, 0.125f}));

  // Step 3: every expert at the mean moves none.
  bias.CountMicroBatch(std::vector<int32_t>{0, 1, 2, 3}, {}, 0);
  bias.Update(bias.step_tokens(), 0.125f);
  EXPECT_EQ(Values(bias), std::vector<float>({-0.25f, -0.125f, 0.25f, 0.125f}));

  // A skipped step: the counts go, the bias stays.
  bias.CountMicroBatch(std::vector<int32_t>{0, 0, 0, 0}, {}, 0);
  bias.ClearCounts();
  EXPECT_EQ(Counts(bias), std::vector<float>({0, 0, 0, 0}));
  EXPECT_EQ(Values(bias), std::vector<float>({-0.25f, -0.125f, 0.25f, 0.125f}));

  // Step 4 at another rate: counts 0, 1, 0, 3 (mean 1): 0 and 2 under, 1 ties, 3 over.
  bias.CountMicroBatch(std::vector<int32_t>{3, 1, 3, 3}, {}, 0);
  bias.Update(bias.step_tokens(), 0.5f);
  EXPECT_EQ(Values(bias), std::vector<float>({0.25f, -0.125f, 0.75f, -0.375f}));
}

// Padding to capacity fills every expert's rows, and Megatron counts its routing map,
// which padding fills: every expert counts the padded rows, so the bias cannot move.
TEST(ExpertBiasTest, PaddingToCapacityCountsEveryExpertAlike) {
  ExpertBias bias("b", 3);
  bias.CountMicroBatch(std::vector<int32_t>{0, 0, 0}, std::vector<uint8_t>{1, 1, 0}, 2);
  EXPECT_EQ(Counts(bias), std::vector<float>({2, 2, 2}));
  bias.Update(bias.step_tokens(), 1.0f);
  EXPECT_EQ(Values(bias), std::vector<float>({0, 0, 0}));
}

// The rule alone, on fp32 values as Megatron keeps them.
TEST(ExpertBiasTest, UpdateAddsRateTimesSignOfDistanceBelowTheMean) {
  std::vector<float> bias = {0.5f, -0.5f, 0.0f};
  // mean of 10, 0, 5 is 5.
  UpdateExpertBias(std::vector<float>{10, 0, 5}, 0.001f, absl::MakeSpan(bias));
  EXPECT_EQ(bias, std::vector<float>({0.5f - 0.001f, -0.5f + 0.001f, 0.0f}));
}

}  // namespace
}  // namespace conveyor
