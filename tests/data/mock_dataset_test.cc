#include "data/mock_dataset.h"

#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace conveyor {
namespace {

TEST(MockSampleSourceTest, ShapeAndRange) {
  MockSampleSource source(1, 100, 16);
  for (int64_t i = 0; i < 50; ++i) {
    auto s = source.Sample(i);
    ASSERT_TRUE(s.ok()) << s.status();
    ASSERT_EQ(s->size(), 17u);
    for (int32_t t : *s) {
      EXPECT_GE(t, 0);
      EXPECT_LT(t, 100);
    }
  }
}

TEST(MockSampleSourceTest, DeterministicAcrossInstances) {
  // Two "ranks" asking for the same sample in different orders agree.
  MockSampleSource a(7, 50257, 32), b(7, 50257, 32);
  const auto late = *b.Sample(1000);
  (void)*b.Sample(3);
  EXPECT_EQ(*a.Sample(3), *b.Sample(3));
  EXPECT_EQ(*a.Sample(1000), late);
}

TEST(MockSampleSourceTest, SeedAndIndexChangeTheData) {
  MockSampleSource a(1, 50257, 64), b(2, 50257, 64);
  EXPECT_NE(*a.Sample(0), *b.Sample(0));
  EXPECT_NE(*a.Sample(0), *a.Sample(1));
  // Tokens spread over the vocabulary rather than repeating.
  const auto s = *a.Sample(5);
  EXPECT_GT(std::set<int32_t>(s.begin(), s.end()).size(), 50u);
}

TEST(MockSampleSourceTest, SamplesCountWithOneStrideSoTheyAreLearnable) {
  MockSampleSource source(9, 1000, 32);
  std::set<int> strides;
  for (int64_t i = 0; i < 50; ++i) {
    const std::vector<int32_t> s = *source.Sample(i);
    const int stride = (s[1] - s[0] + 1000) % 1000;
    strides.insert(stride);
    for (size_t p = 1; p < s.size(); ++p) EXPECT_EQ((s[p] - s[p - 1] + 1000) % 1000, stride);
  }
  EXPECT_EQ(strides, (std::set<int>{1, 2, 3}));
}

TEST(MockSampleSourceTest, WrapsAndRejectsBadShapes) {
  MockSampleSource small(3, 10, 4, /*num_samples=*/8);
  EXPECT_EQ(small.size(), 8);
  EXPECT_EQ(*small.Sample(2), *small.Sample(10));
  EXPECT_EQ(*small.Sample(7), *small.Sample(-1));
  EXPECT_FALSE(MockSampleSource(3, 0, 4).Sample(0).ok());
}

}  // namespace
}  // namespace conveyor
