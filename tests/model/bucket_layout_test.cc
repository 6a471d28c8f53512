// Bucketing arithmetic against cases worked out by hand: buckets close before the
// parameter that would overflow them, a larger parameter gets its own, each is padded
// to the alignment, and slices count their parameter elements with the padding last.
#include "model/bucket_layout.h"

#include <vector>

#include "gtest/gtest.h"

namespace conveyor {
namespace {

TEST(BucketLayoutTest, ClosesBucketsAtTheLimitAndPadsEach) {
  // Limit 10, align 4: [3, 5] = 8 -> 8; [4] (8 + 4 > 10) -> 4; [12] alone -> 12; [1] -> 4.
  const std::vector<BucketSpan> b = LayOutBuckets({3, 5, 4, 12, 1}, 10, 4);
  ASSERT_EQ(b.size(), 4u);
  const std::vector<std::vector<int64_t>> want = {
      {0, 2, 0, 8, 8}, {2, 1, 8, 4, 4}, {3, 1, 12, 12, 12}, {4, 1, 24, 1, 4}};
  for (size_t i = 0; i < b.size(); ++i) {
    EXPECT_EQ((std::vector<int64_t>{b[i].first, b[i].count, b[i].start, b[i].used, b[i].size}),
              want[i])
        << "bucket " << i;
  }
}

TEST(BucketLayoutTest, SlicesHoldTheParametersBeforeThePadding) {
  const BucketSpan bucket{0, 2, 0, 9, 12};  // 9 elements padded to 12, 4 slices of 3
  EXPECT_EQ(UsedInSlice(bucket, 4, 0), 3);
  EXPECT_EQ(UsedInSlice(bucket, 4, 2), 3);
  EXPECT_EQ(UsedInSlice(bucket, 4, 3), 0);
  const BucketSpan odd{0, 1, 0, 7, 8};  // 2 slices of 4
  EXPECT_EQ(UsedInSlice(odd, 2, 0), 4);
  EXPECT_EQ(UsedInSlice(odd, 2, 1), 3);
}

TEST(BucketLayoutTest, NoParametersNoBuckets) { EXPECT_TRUE(LayOutBuckets({}, 10, 2).empty()); }

}  // namespace
}  // namespace conveyor
