// The builder against Megatron: the fixture's GPT dataset was made by
// BlendedMegatronDatasetBuilder(GPTDataset, [40, None, None]) with split
// "1,0,0", seed 1234 and sequence length 16; the same request here must give
// the same 40 samples, whether through --data-path or --train-data-path.
#include "data/dataset_builder.h"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "data/gpt_dataset.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/data/shared_data.h"

namespace conveyor {
namespace {

using ::conveyor::testing_util::ReadJsonOrDie;
using ::conveyor::testing_util::TestDataDir;
using ::testing::HasSubstr;

std::string FixturePrefix() { return TestDataDir() + "/megatron-fixtures/tiny_uint16"; }

Json FixtureSamples() {
  return ReadJsonOrDie(
      TestDataDir() +
      "/megatron-fixtures/gpt_tiny_uint16_seq16_seed1234_n40.json")["samples"]["items"];
}

DatasetBuildConfig FixtureConfig() {
  DatasetBuildConfig c;
  c.sequence_length = 16;
  c.random_seed = 1234;
  return c;
}

Blend Prefixes(std::vector<std::string> prefixes) {
  Blend b;
  b.prefixes = std::move(prefixes);
  return b;
}

std::vector<int64_t> SampleOf(const SampleSource& s, int64_t i) {
  absl::StatusOr<std::vector<int32_t>> t = s.Sample(i);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::vector<int64_t>(t->begin(), t->end()) : std::vector<int64_t>{};
}

void ExpectFixtureSamples(const SampleSource& s) {
  const Json items = FixtureSamples();
  ASSERT_EQ(s.size(), 40);
  for (const Json& item : items) {
    EXPECT_EQ(SampleOf(s, item["idx"].get<int64_t>()), item["tokens"].get<std::vector<int64_t>>())
        << "sample " << item["idx"].get<int64_t>();
  }
}

// The sequence ids a GPT split draws on.
std::set<int32_t> DocumentsOf(const SampleSource* s) {
  const auto* gpt = dynamic_cast<const GptDataset*>(s);
  EXPECT_NE(gpt, nullptr);
  if (gpt == nullptr) return {};
  return std::set<int32_t>(gpt->indices().document_index.begin(),
                           gpt->indices().document_index.end());
}

TEST(DatasetBuilderTest, DataPathWithSplitMatchesMegatronFixture) {
  DatasetBuildConfig c = FixtureConfig();
  c.blend = Prefixes({FixturePrefix()});
  c.split = "1,0,0";
  auto splits = BuildSplitDatasets(c, {40, 0, 0});
  ASSERT_TRUE(splits.ok()) << splits.status();
  ASSERT_NE((*splits)[0], nullptr);
  EXPECT_EQ((*splits)[1], nullptr);
  EXPECT_EQ((*splits)[2], nullptr);
  ExpectFixtureSamples(*(*splits)[0]);
}

TEST(DatasetBuilderTest, TrainDataPathUsesTheWholeDataset) {
  DatasetBuildConfig c = FixtureConfig();
  c.blend_per_split[0] = Prefixes({FixturePrefix()});
  c.blend_per_split[1] = Prefixes({FixturePrefix()});
  auto splits = BuildSplitDatasets(c, {40, 5, 3});
  ASSERT_TRUE(splits.ok()) << splits.status();
  ExpectFixtureSamples(*(*splits)[0]);
  const std::set<int32_t> all = {0, 1, 2, 3, 4, 5, 6};
  EXPECT_EQ(DocumentsOf((*splits)[1].get()), all);
  EXPECT_EQ((*splits)[2], nullptr);  // no --test-data-path
}

TEST(DatasetBuilderTest, SplitChoosesSequenceRanges) {
  // 7 sequences, "5,1,1": cumulative fractions 5/7, 6/7, 1 -> [0,5), [5,6), [6,7).
  DatasetBuildConfig c = FixtureConfig();
  c.blend = Prefixes({FixturePrefix()});
  c.split = "5,1,1";
  auto splits = BuildSplitDatasets(c, {4, 2, 1});
  ASSERT_TRUE(splits.ok()) << splits.status();
  EXPECT_EQ(DocumentsOf((*splits)[0].get()), std::set<int32_t>({0, 1, 2, 3, 4}));
  EXPECT_EQ(DocumentsOf((*splits)[1].get()), std::set<int32_t>({5}));
  EXPECT_EQ(DocumentsOf((*splits)[2].get()), std::set<int32_t>({6}));
  // A zero weight builds no split, whatever its size.
  c.split = "1,1,0";
  splits = BuildSplitDatasets(c, {4, 2, 1});
  ASSERT_TRUE(splits.ok()) << splits.status();
  // round(0.5 * 7) = round(3.5) = 4 (half to even): [0,4) and [4,7).
  EXPECT_EQ(DocumentsOf((*splits)[0].get()), std::set<int32_t>({0, 1, 2, 3}));
  EXPECT_EQ(DocumentsOf((*splits)[1].get()), std::set<int32_t>({4, 5, 6}));
  EXPECT_EQ((*splits)[2], nullptr);
}

TEST(DatasetBuilderTest, EmptySplitRangeNamesTheFlag) {
  // 949,50,1 of 7 sequences: round(6.643) = 7 = round(6.993), so valid is empty.
  DatasetBuildConfig c = FixtureConfig();
  c.blend = Prefixes({FixturePrefix()});
  c.split = "949,50,1";
  auto splits = BuildSplitDatasets(c, {10, 2, 0});
  ASSERT_FALSE(splits.ok());
  EXPECT_THAT(splits.status().message(), HasSubstr("--split 949,50,1"));
  EXPECT_THAT(splits.status().message(), HasSubstr("valid split no sequences"));
  // Not asking the empty split for samples is fine.
  splits = BuildSplitDatasets(c, {10, 0, 0});
  EXPECT_TRUE(splits.ok()) << splits.status();
}

TEST(DatasetBuilderTest, ErrorsNameFlagAndFile) {
  DatasetBuildConfig c = FixtureConfig();
  c.blend_per_split[0] = Prefixes({"/nonexistent/corpus"});
  auto missing = BuildSplitDatasets(c, {10, 0, 0});
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("--train-data-path"));
  EXPECT_THAT(missing.status().message(), HasSubstr("/nonexistent/corpus.idx"));

  c.blend = Prefixes({FixturePrefix()});
  auto both = BuildSplitDatasets(c, {10, 0, 0});
  ASSERT_FALSE(both.ok());
  EXPECT_THAT(both.status().message(), HasSubstr("exclusive"));

  DatasetBuildConfig none = FixtureConfig();
  EXPECT_FALSE(BuildSplitDatasets(none, {10, 0, 0}).ok());

  DatasetBuildConfig bad_split = FixtureConfig();
  bad_split.blend = Prefixes({FixturePrefix()});
  bad_split.split = "0,0,0";
  auto zero = BuildSplitDatasets(bad_split, {10, 0, 0});
  ASSERT_FALSE(zero.ok());
  EXPECT_THAT(zero.status().message(), HasSubstr("--split"));
}

}  // namespace
}  // namespace conveyor
