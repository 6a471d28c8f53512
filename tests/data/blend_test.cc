#include "data/blend.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace conveyor {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(BlendTest, PrefixesOnly) {
  auto one = ParseBlend({"data/a"}, "--data-path");
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_THAT(one->prefixes, ElementsAre("data/a"));
  EXPECT_FALSE(one->weighted());
  // An even count of non-numbers is prefixes too, as in Megatron.
  auto two = ParseBlend({"a", "b"}, "--data-path");
  ASSERT_TRUE(two.ok());
  EXPECT_THAT(two->prefixes, ElementsAre("a", "b"));
  EXPECT_FALSE(two->weighted());
}

TEST(BlendTest, WeightPrefixPairs) {
  auto b = ParseBlend({"0.3", "a", "0.7", "b"}, "--data-path");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_THAT(b->prefixes, ElementsAre("a", "b"));
  EXPECT_THAT(b->weights, ElementsAre(0.3, 0.7));
  // One string holding the whole list reads the same.
  auto joined = ParseBlend({"0.3 a  0.7 b"}, "--data-path");
  ASSERT_TRUE(joined.ok());
  EXPECT_EQ(joined->prefixes, b->prefixes);
  EXPECT_EQ(joined->weights, b->weights);
}

TEST(BlendTest, PrefixesAreTakenWholeSpacesAndAll) {
  auto one = ParseBlend({"my data/corpus_text_document"}, "--data-path");
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_THAT(one->prefixes, ElementsAre("my data/corpus_text_document"));
  EXPECT_FALSE(one->weighted());
  // Trimmed, as Megatron strips each prefix.
  auto padded = ParseBlend({" my data/x\t"}, "--data-path");
  ASSERT_TRUE(padded.ok()) << padded.status();
  EXPECT_THAT(padded->prefixes, ElementsAre("my data/x"));

  auto pairs = ParseBlend({"0.3", "a b/x", "0.7", "y"}, "--data-path");
  ASSERT_TRUE(pairs.ok()) << pairs.status();
  EXPECT_THAT(pairs->prefixes, ElementsAre("a b/x", "y"));
  EXPECT_THAT(pairs->weights, ElementsAre(0.3, 0.7));
  // In a list given as one string, the text between two weights is one prefix.
  auto joined = ParseBlend({"0.3 a b/x 0.7  y"}, "--data-path");
  ASSERT_TRUE(joined.ok()) << joined.status();
  EXPECT_THAT(joined->prefixes, ElementsAre("a b/x", "y"));
  EXPECT_THAT(joined->weights, ElementsAre(0.3, 0.7));
}

TEST(BlendTest, Errors) {
  auto empty = ParseBlend({}, "--train-data-path");
  ASSERT_FALSE(empty.ok());
  EXPECT_THAT(empty.status().message(), HasSubstr("--train-data-path"));
  auto odd = ParseBlend({"0.3", "a", "0.7"}, "--data-path");
  ASSERT_FALSE(odd.ok());
  EXPECT_THAT(odd.status().message(), HasSubstr("starts with a weight"));
  auto mixed = ParseBlend({"0.3", "a", "b", "c"}, "--data-path");
  ASSERT_FALSE(mixed.ok());
  EXPECT_THAT(mixed.status().message(), HasSubstr("mixes weights and prefixes"));
  auto negative = ParseBlend({"-1", "a", "2", "b"}, "--data-path");
  ASSERT_FALSE(negative.ok());
  EXPECT_THAT(negative.status().message(), HasSubstr("'-1' of a"));
  auto zero = ParseBlend({"0", "a", "0", "b"}, "--data-path");
  ASSERT_FALSE(zero.ok());
  EXPECT_THAT(zero.status().message(), HasSubstr("sum to 0"));
}

TEST(BlendTest, NormalizeWeights) {
  EXPECT_THAT(NormalizeWeights({1, 3}), ElementsAre(0.25, 0.75));
  EXPECT_THAT(NormalizeWeights({2, 2, 4}), ElementsAre(0.25, 0.25, 0.5));
}

}  // namespace
}  // namespace conveyor
