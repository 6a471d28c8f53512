#include "data/split.h"

#include <string>

#include "gtest/gtest.h"

namespace conveyor {
namespace {

TEST(SplitTest, FixtureSplitTakesEverything) {
  // The Megatron fixture's "1,0,0": split_matrix [(0, 1.0), None, None].
  auto m = ParseSplit("1,0,0");
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_TRUE((*m)[0].has_value());
  EXPECT_EQ((*m)[0]->first, 0.0);
  EXPECT_EQ((*m)[0]->second, 1.0);
  EXPECT_FALSE((*m)[1].has_value());
  EXPECT_FALSE((*m)[2].has_value());
  auto r = SplitRanges(*m, 7);
  EXPECT_EQ(*r[0], std::make_pair(int64_t{0}, int64_t{7}));
}

TEST(SplitTest, NormalisesAndRounds) {
  auto m = ParseSplit("949,50,1");
  ASSERT_TRUE(m.ok());
  auto r = SplitRanges(*m, 1000);
  EXPECT_EQ(*r[0], std::make_pair(int64_t{0}, int64_t{949}));
  EXPECT_EQ(*r[1], std::make_pair(int64_t{949}, int64_t{999}));
  EXPECT_EQ(*r[2], std::make_pair(int64_t{999}, int64_t{1000}));
  // Missing parts are zero; '/' works as a separator too.
  auto two = ParseSplit("1/1");
  ASSERT_TRUE(two.ok());
  EXPECT_FALSE((*two)[2].has_value());
  // Ties round to even like Python: 0.5 * 5 = 2.5 -> 2.
  auto half = SplitRanges(*two, 5);
  EXPECT_EQ(*half[0], std::make_pair(int64_t{0}, int64_t{2}));
  EXPECT_EQ(*half[1], std::make_pair(int64_t{2}, int64_t{5}));
}

TEST(SplitTest, RejectsBadSplits) {
  for (const char* bad : {"0,0,0", "", "a,1", "-1,2", "1,1,1,1"}) {
    auto m = ParseSplit(bad);
    ASSERT_FALSE(m.ok()) << bad;
    EXPECT_NE(std::string(m.status().message()).find("--split"), std::string::npos);
  }
}

}  // namespace
}  // namespace conveyor
