#include "parallel/pipeline/bubble.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace conveyor {
namespace pipeline {
namespace {

TEST(BubbleTest, OneFOneBBubbleIsPMinusOneOverMPlusPMinusOne) {
  EXPECT_DOUBLE_EQ(PipelineBubble(8, 16), 7.0 / 23.0);  // 30.4%
  EXPECT_NEAR(PipelineBubble(8, 64), 0.099, 5e-4);      // 7/71 = 9.9%
  EXPECT_NEAR(PipelineBubble(16, 64), 0.190, 5e-4);     // 15/79 = 19.0%
  EXPECT_DOUBLE_EQ(PipelineBubble(4, 4), 3.0 / 7.0);    // GPipe, P = M = 4: 42.9%
  EXPECT_DOUBLE_EQ(PipelineBubble(1, 5), 0.0);
}

TEST(BubbleTest, InterleavingDividesTheFillByV) {
  EXPECT_DOUBLE_EQ(InterleavedBubble(4, 2, 8), 3.0 / 19.0);
  EXPECT_DOUBLE_EQ(InterleavedBubble(8, 1, 16), PipelineBubble(8, 16));
}

TEST(BubbleTest, ZeroBubbleH1LeavesAThirdOf1F1BsIdleTime) {
  // Idle per rank, in units: 1F1B (P-1)(F+B+W) = 21, ZB-H1 (P-1)(F+B-W) = 7.
  const double zb = ZeroBubbleH1Bubble(8, 16, 1, 1, 1);
  EXPECT_DOUBLE_EQ(zb, 7.0 / 55.0);
  EXPECT_DOUBLE_EQ(zb * 55.0 * 3.0, PipelineBubble(8, 16) * 69.0);
}

TEST(BubbleTest, PredictedByName) {
  EXPECT_DOUBLE_EQ(*PredictedBubble("1f1b", 8, 1, 16), 7.0 / 23.0);
  EXPECT_DOUBLE_EQ(*PredictedBubble("interleaved-1f1b", 4, 2, 8), 3.0 / 19.0);
  EXPECT_DOUBLE_EQ(*PredictedBubble("zb-h1", 4, 1, 8), 3.0 / 27.0);
  EXPECT_DOUBLE_EQ(*PredictedBubble("zbv", 4, 2, 8), 3.0 / 51.0);
  EXPECT_THAT(std::string(PredictedBubble("pipedream", 4, 1, 8).status().message()),
              testing::HasSubstr("pipedream"));
}

TEST(BubbleTest, PeakStashed) {
  EXPECT_EQ(*PeakStashed("gpipe", 4, 1, 16, 0), 16);
  EXPECT_EQ(*PeakStashed("1f1b", 4, 1, 16, 0), 4);
  EXPECT_EQ(*PeakStashed("1f1b", 4, 1, 16, 3), 1);
  EXPECT_EQ(*PeakStashed("1f1b", 8, 1, 3, 0), 3);
  EXPECT_EQ(*PeakStashed("interleaved-1f1b", 4, 2, 8, 0), 11);
  EXPECT_EQ(*PeakStashed("zb-h1", 4, 1, 16, 3), 4);
  EXPECT_EQ(*PeakStashed("zb-h2", 4, 1, 16, 0), 7);
}

}  // namespace
}  // namespace pipeline
}  // namespace conveyor
