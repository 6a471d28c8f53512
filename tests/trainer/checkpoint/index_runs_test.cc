// Runs of global indices: compaction, validation and the proto round trip.
#include "trainer/checkpoint/index_runs.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/trainer/checkpoint/checkpoint_test_util.h"

namespace conveyor {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing_util::ExpandRuns;

std::vector<IndexRun> Runs(const std::vector<int64_t>& indices) {
  return RunsFromGlobalIndices(indices);
}

TEST(IndexRunsTest, ContiguousIndicesBecomeOneRun) {
  EXPECT_THAT(Runs({4, 5, 6, 7}), ElementsAre(IndexRun{4, 4, 1, 0}));
  EXPECT_TRUE(Runs({}).empty());
}

TEST(IndexRunsTest, EqualBlocksAtAFixedStrideBecomeOneStridedRun) {
  // Columns 2..3 of a [3, 5] matrix: a row-parallel shard.
  EXPECT_THAT(Runs({2, 3, 7, 8, 12, 13}), ElementsAre(IndexRun{2, 2, 3, 5}));
}

TEST(IndexRunsTest, IrregularBlocksStaySeparate) {
  EXPECT_THAT(Runs({0, 1, 5, 9, 10, 11}),
              ElementsAre(IndexRun{0, 2, 1, 0}, IndexRun{5, 1, 1, 0}, IndexRun{9, 3, 1, 0}));
  // A broken stride starts a new run.
  EXPECT_THAT(Runs({0, 4, 8, 13}), ElementsAre(IndexRun{0, 1, 3, 4}, IndexRun{13, 1, 1, 0}));
}

TEST(IndexRunsTest, LocalOrderIsKeptEvenWhenItGoesBackwards) {
  const std::vector<int64_t> indices = {6, 7, 0, 1, 2};
  EXPECT_EQ(ExpandRuns(Runs(indices)), indices);
}

TEST(IndexRunsTest, RoundTripsThroughTheManifestMessage) {
  const std::vector<IndexRun> runs = {{0, 3, 1, 0}, {10, 2, 4, 6}};
  google::protobuf::RepeatedPtrField<RunRecord> proto;
  RunsToProto(runs, &proto);
  EXPECT_FALSE(proto[0].has_count());  // plain runs keep the defaults: small manifests
  EXPECT_EQ(RunsFromProto(proto), runs);
  EXPECT_EQ(CountElements(runs), 11);
}

TEST(IndexRunsTest, ElementRangeIsOneRun) {
  EXPECT_THAT(ElementRange(100, 28), ElementsAre(IndexRun{100, 28, 1, 0}));
  EXPECT_TRUE(ElementRange(5, 0).empty());
}

TEST(IndexRunsTest, ValidationNamesTheProblem) {
  EXPECT_TRUE(ValidateRuns({{0, 4, 2, 6}}, 10, "t").ok());
  EXPECT_THAT(ValidateRuns({{0, 4, 2, 7}}, 10, "tensor w").message(),
              HasSubstr("reaches past the tensor's 10 elements"));
  EXPECT_THAT(ValidateRuns({{0, 4, 2, 7}}, 10, "tensor w").message(), HasSubstr("tensor w"));
  EXPECT_THAT(ValidateRuns({{0, 4, 2, 3}}, 100, "t").message(), HasSubstr("overlap"));
  EXPECT_THAT(ValidateRuns({{-1, 4, 1, 0}}, 100, "t").message(), HasSubstr("start >= 0"));
  EXPECT_THAT(ValidateRuns({{0, 1, int64_t{1} << 62, int64_t{1} << 62}}, 100, "t").message(),
              HasSubstr("reaches past"));
}

TEST(IndexRunsTest, SliceRunsCutsLocalPositions) {
  // A row-parallel shard: 4 rows of 3 columns at stride 10, then a plain run.
  const std::vector<IndexRun> runs = {{2, 3, 4, 10}, {100, 5, 1, 0}};
  const std::vector<int64_t> all = ExpandRuns(runs);
  for (int64_t begin = 0; begin <= 17; ++begin) {
    for (int64_t end = begin; end <= 17; ++end) {
      const std::vector<int64_t> want(all.begin() + begin, all.begin() + end);
      EXPECT_EQ(ExpandRuns(SliceRuns(runs, begin, end)), want) << begin << ".." << end;
    }
  }
  // Whole runs stay strided.
  EXPECT_THAT(SliceRuns(runs, 0, 12), ElementsAre(IndexRun{2, 3, 4, 10}));
}

TEST(IndexRunsTest, ShapesAndCounts) {
  EXPECT_EQ(NumElements({}), 1);  // a scalar
  EXPECT_EQ(NumElements({3, 0}), 0);
  EXPECT_EQ(FormatShape({4, 8}), "[4, 8]");
}

}  // namespace
}  // namespace conveyor
