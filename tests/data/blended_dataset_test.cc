// Blending as Megatron's BlendedDataset. The index arrays below were worked
// out by hand from the greedy rule: sample i goes to the dataset with the
// largest weight * max(i, 1) - taken, the lowest id on ties. Weights are
// chosen exact in binary so that no tie depends on rounding.
#include "data/blended_dataset.h"

#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "data/blending_indices.h"
#include "data/dataset_builder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/data/shared_data.h"

namespace conveyor {
namespace {

using ::conveyor::testing_util::ReadJsonOrDie;
using ::conveyor::testing_util::TestDataDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Sample i of source `id` is {id, i}: shows which source served what.
class TaggedSource : public SampleSource {
 public:
  TaggedSource(int id, int64_t size) : id_(id), size_(size) {}
  int64_t size() const override { return size_; }
  absl::StatusOr<std::vector<int32_t>> Sample(int64_t index) const override {
    return std::vector<int32_t>{id_, int32_t(index)};
  }

 private:
  int id_;
  int64_t size_;
};

TEST(BlendingIndicesTest, EqualWeightsAlternateFromTheFirst) {
  // i=0: errors .5,.5 tie -> 0; i=1: -.5,.5 -> 1; i=2: 0,0 -> 0; i=3 -> 1.
  BlendingIndices b = BuildBlendingIndices({0.5, 0.5}, 4);
  EXPECT_THAT(b.dataset_index, ElementsAre(0, 1, 0, 1));
  EXPECT_THAT(b.dataset_sample_index, ElementsAre(0, 0, 1, 1));
}

TEST(BlendingIndicesTest, ThreeDatasets) {
  // i  scale  errors (w*scale - taken)     pick  taken after
  // 0    1    .2   .3   .5                  2    0 0 1
  // 1    1    .2   .3  -.5                  1    0 1 1
  // 2    2    .4  -.4   0                   0    1 1 1
  // 3    3   -.4  -.1   .5                  2    1 1 2
  // 4    4   -.2   .2   0                   1    1 2 2
  // 5    5    0   -.5   .5                  2    1 2 3
  BlendingIndices b = BuildBlendingIndices({0.2, 0.3, 0.5}, 6);
  EXPECT_THAT(b.dataset_index, ElementsAre(2, 1, 0, 2, 1, 2));
  EXPECT_THAT(b.dataset_sample_index, ElementsAre(0, 0, 0, 1, 1, 2));
}

TEST(BlendingIndicesTest, QuarterThreeQuarters) {
  // Ties (0, 0) at i = 4 and 8 go to dataset 0.
  BlendingIndices b = BuildBlendingIndices({0.25, 0.75}, 11);
  EXPECT_THAT(b.dataset_index, ElementsAre(1, 0, 1, 1, 0, 1, 1, 1, 0, 1, 1));
  EXPECT_THAT(b.dataset_sample_index, ElementsAre(0, 0, 1, 2, 1, 3, 4, 5, 2, 6, 7));
}

TEST(BlendingIndicesTest, SamplesPerDatasetAsMegatron) {
  // ceil(10 * .25) = 3, ceil(10 * .75) = 8; with the 0.5% surplus
  // ceil(3 * 1.005) = 4 and ceil(8 * 1.005) = 9.
  EXPECT_THAT(SamplesPerDataset({0.25, 0.75}, 10, 0.0), ElementsAre(3, 8));
  EXPECT_THAT(SamplesPerDataset({0.25, 0.75}, 10, kMidLevelDatasetSurplus), ElementsAre(4, 9));
  // 1000: 250 -> ceil(251.25) = 252, 750 -> ceil(753.75) = 754.
  EXPECT_THAT(SamplesPerDataset({0.25, 0.75}, 1000, kMidLevelDatasetSurplus),
              ElementsAre(252, 754));
  // Products are taken in double, as Python does: 100 * 0.07 is
  // 7.000000000000001, so Megatron targets 8 (and asks ceil(8 * 1.005) = 9).
  EXPECT_THAT(SamplesPerDataset({0.07, 0.93}, 100, 0.0), ElementsAre(8, 93));
  EXPECT_THAT(SamplesPerDataset({0.07, 0.93}, 100, kMidLevelDatasetSurplus), ElementsAre(9, 94));
}

TEST(BlendedDatasetTest, ServesSourcesInBlendOrder) {
  std::vector<std::unique_ptr<SampleSource>> sources;
  sources.push_back(std::make_unique<TaggedSource>(0, 4));
  sources.push_back(std::make_unique<TaggedSource>(1, 9));
  // Unnormalised weights are normalised: 1:3 is 0.25/0.75.
  auto blend = BlendedDataset::Create(std::move(sources), {1, 3}, 11);
  ASSERT_TRUE(blend.ok()) << blend.status();
  EXPECT_EQ((*blend)->size(), 11);
  EXPECT_THAT((*blend)->weights(), ElementsAre(0.25, 0.75));
  EXPECT_THAT(*(*blend)->Sample(0), ElementsAre(1, 0));
  EXPECT_THAT(*(*blend)->Sample(4), ElementsAre(0, 1));
  EXPECT_THAT(*(*blend)->Sample(10), ElementsAre(1, 7));
  EXPECT_THAT(*(*blend)->Sample(11), ElementsAre(1, 0));  // wraps around
}

TEST(BlendedDatasetTest, RejectsASourceTooSmallForItsShare) {
  std::vector<std::unique_ptr<SampleSource>> sources;
  sources.push_back(std::make_unique<TaggedSource>(0, 2));  // the blend takes 3
  sources.push_back(std::make_unique<TaggedSource>(1, 9));
  auto blend = BlendedDataset::Create(std::move(sources), {0.25, 0.75}, 11);
  ASSERT_FALSE(blend.ok());
  EXPECT_THAT(blend.status().message(), HasSubstr("dataset 0 has 2 samples"));
}

TEST(BlendedDatasetTest, RefusesIndicesTooLargeForMemoryBeforeAllocating) {
  std::vector<std::unique_ptr<SampleSource>> sources;
  sources.push_back(std::make_unique<TaggedSource>(0, int64_t{1} << 60));
  sources.push_back(std::make_unique<TaggedSource>(1, int64_t{1} << 60));
  // 10 bytes a sample (an int16 dataset id, an int64 sample id).
  auto blend = BlendedDataset::Create(std::move(sources), {1, 1}, 1000000000000000);
  ASSERT_FALSE(blend.ok());
  EXPECT_EQ(blend.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(blend.status().message(),
              HasSubstr("the blending indices of 1000000000000000 samples need 9313225.7 GiB of "
                        "host memory, but this process may use "));
}

TEST(BlendingIndicesTest, SamplesPerDatasetSaturates) {
  // The surplus takes the request past int64 (it used to wrap to a negative).
  EXPECT_THAT(
      SamplesPerDataset({1.0}, std::numeric_limits<int64_t>::max(), kMidLevelDatasetSurplus),
      ElementsAre(std::numeric_limits<int64_t>::max()));
}

// The fixture twice with equal weights, 78 samples: targets ceil(39) = 39
// each and requests ceil(39 * 1.005) = 40 each, so each part is exactly the
// fixture's 40-sample GPT dataset; the blend alternates 0,1,0,1 and serves
// sample j of each at positions 2j and 2j + 1.
TEST(BlendedDatasetTest, WeightedDataPathOverTheMegatronFixture) {
  const std::string dir = TestDataDir() + "/megatron-fixtures";
  const Json items =
      ReadJsonOrDie(dir + "/gpt_tiny_uint16_seq16_seed1234_n40.json")["samples"]["items"];
  DatasetBuildConfig c;
  c.sequence_length = 16;
  c.random_seed = 1234;
  c.split = "1,0,0";
  c.blend = Blend{{dir + "/tiny_uint16", dir + "/tiny_uint16"}, {1, 1}};
  auto splits = BuildSplitDatasets(c, {78, 0, 0});
  ASSERT_TRUE(splits.ok()) << splits.status();
  const auto* blend = dynamic_cast<const BlendedDataset*>((*splits)[0].get());
  ASSERT_NE(blend, nullptr);
  ASSERT_EQ(blend->size(), 78);
  EXPECT_EQ(blend->dataset(0).size(), 40);
  EXPECT_EQ(blend->dataset(1).size(), 40);
  for (int64_t j = 0; j < 39; ++j) {
    const std::vector<int64_t> want = items[j]["tokens"].get<std::vector<int64_t>>();
    for (int64_t i : {2 * j, 2 * j + 1}) {
      auto got = blend->Sample(i);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(std::vector<int64_t>(got->begin(), got->end()), want) << "blended sample " << i;
    }
  }
}

TEST(BlendedDatasetTest, UnweightedPrefixesBlendOneEpochEachBySize) {
  // No weights: one epoch of each (323 tokens -> (323 - 1) / 16 = 20
  // samples), blended 20:20 and capped at the request.
  const std::string prefix = TestDataDir() + "/megatron-fixtures/tiny_uint16";
  DatasetBuildConfig c;
  c.sequence_length = 16;
  c.random_seed = 1234;
  c.split = "1,0,0";
  c.blend = Blend{{prefix, prefix}, {}};
  auto capped = BuildSplitDatasets(c, {30, 0, 0});
  ASSERT_TRUE(capped.ok()) << capped.status();
  EXPECT_EQ((*capped)[0]->size(), 30);
  auto all = BuildSplitDatasets(c, {1000, 0, 0});
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ((*all)[0]->size(), 40);
}

}  // namespace
}  // namespace conveyor
