// TikTokenizer against the `tiktoken` library, set up as Megatron's
// CustomTikTokenizer does (tools/gen_tokenizer_refs.py wrote the ids).
#include "data/tokenizers/tiktoken_tokenizer.h"

#include <fstream>
#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/data/tokenizer_fixtures.h"
#include "tests/util/test_dirs.h"

namespace conveyor {
namespace {

using ::conveyor::testing_util::ExpectMatchesReference;
using ::conveyor::testing_util::FreshDir;
using ::conveyor::testing_util::ReadFixtureJson;
using ::conveyor::testing_util::TokenizerFixture;
using ::testing::HasSubstr;

class TiktokenReferenceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(TiktokenReferenceTest, EveryTextGetsTiktokensIds) {
  const nlohmann::json expected =
      ReadFixtureJson(TokenizerFixture("tiktoken/expected_" + GetParam() + ".json"));
  TikTokenSpec spec;
  spec.rank_file = TokenizerFixture("tiktoken/ranks.json");
  spec.pattern = expected.at("pattern").get<std::string>();
  spec.num_special_tokens = expected.at("num_special_tokens").get<int>();
  spec.vocab_size = expected.at("vocab_size").get<int64_t>();
  auto tok = TikTokenizer::Load(spec);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->vocab_size(), spec.vocab_size);
  EXPECT_EQ((*tok)->eod(), expected.at("eod").get<int32_t>());
  EXPECT_GE(ExpectMatchesReference(**tok, expected), 30);
}

INSTANTIATE_TEST_SUITE_P(Patterns, TiktokenReferenceTest, ::testing::Values("v1", "v2"));

TEST(TikTokenizerTest, ReadsTiktokensTextFormatToo) {
  // The same ranks as "<base64> <rank>" lines give the same ids.
  const nlohmann::json ranks = ReadFixtureJson(TokenizerFixture("tiktoken/ranks.json"));
  const std::string path = FreshDir("tiktoken_text") + "/ranks.tiktoken";
  {
    std::ofstream out(path);
    for (const nlohmann::json& r : ranks) {
      out << r.at("token_bytes").get<std::string>() << " " << r.at("rank").get<int>() << "\n";
    }
  }
  const nlohmann::json expected = ReadFixtureJson(TokenizerFixture("tiktoken/expected_v2.json"));
  TikTokenSpec spec{path, "v2", expected.at("num_special_tokens").get<int>(),
                    expected.at("vocab_size").get<int64_t>()};
  auto tok = TikTokenizer::Load(spec);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_GE(ExpectMatchesReference(**tok, expected), 30);
}

TEST(TikTokenizerErrorsTest, VocabularyLargerThanTheRankFileIsRefused) {
  TikTokenSpec spec{TokenizerFixture("tiktoken/ranks.json"), "v2", 1000, 131072};
  auto tok = TikTokenizer::Load(spec);
  ASSERT_FALSE(tok.ok());
  EXPECT_THAT(tok.status().message(), HasSubstr("fewer than --vocab-size 131072"));
}

TEST(TikTokenizerErrorsTest, BadFlagsAndFilesAreNamed) {
  auto pattern = TikTokenizer::Load({TokenizerFixture("tiktoken/ranks.json"), "v3", 10, 1000});
  ASSERT_FALSE(pattern.ok());
  EXPECT_THAT(pattern.status().message(), HasSubstr("--tiktoken-pattern 'v3'"));
  auto specials = TikTokenizer::Load({TokenizerFixture("tiktoken/ranks.json"), "v2", 2, 1000});
  ASSERT_FALSE(specials.ok());
  EXPECT_THAT(specials.status().message(), HasSubstr("--tiktoken-num-special-tokens 2"));
  const std::string bad = FreshDir("tiktoken_bad") + "/ranks.json";
  std::ofstream(bad) << R"([{"rank": 0, "token_bytes": "QQ=="}])";  // "A" is not byte 0
  auto ranks = TikTokenizer::Load({bad, "v2", 3, 4});
  ASSERT_FALSE(ranks.ok());
  EXPECT_THAT(ranks.status().message(), HasSubstr(bad + ": rank 0 must be the single byte 0"));
}

}  // namespace
}  // namespace conveyor
