// SentencePieceTokenizer against Python's `sentencepiece` (the ids in each
// fixture's expected.json) and against Megatron's special-token handling,
// as tools/gen_tokenizer_refs.py re-states it over `sentencepiece`.
#include "data/tokenizers/sentencepiece_tokenizer.h"

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
using Flavor = SentencePieceTokenizer::Flavor;

class SpmReferenceTest : public ::testing::TestWithParam<std::string> {
 protected:
  std::string Model() const { return TokenizerFixture(GetParam() + "/tokenizer.model"); }
  nlohmann::json Expected() const {
    return ReadFixtureJson(TokenizerFixture(GetParam() + "/expected.json"));
  }
};

TEST_P(SpmReferenceTest, GptFlavorIsTheModelAlone) {
  auto tok = SentencePieceTokenizer::Load(Model(), Flavor::kGpt, 0);
  ASSERT_TRUE(tok.ok()) << tok.status();
  const nlohmann::json expected = Expected();
  EXPECT_EQ((*tok)->vocab_size(), expected.at("pieces").get<int64_t>());
  EXPECT_EQ((*tok)->eod(), expected.at("eos").get<int32_t>());
  EXPECT_GE(ExpectMatchesReference(**tok, expected), 30);
}

TEST_P(SpmReferenceTest, Llama2FlavorPrependsBos) {
  auto tok = SentencePieceTokenizer::Load(Model(), Flavor::kLlama2, 0);
  ASSERT_TRUE(tok.ok()) << tok.status();
  const nlohmann::json expected = Expected();
  for (const nlohmann::json& c : expected.at("cases")) {
    std::vector<int32_t> want = {expected.at("bos").get<int32_t>()};
    for (int32_t id : c.at("ids").get<std::vector<int32_t>>()) want.push_back(id);
    auto got = (*tok)->Tokenize(c.at("text").get<std::string>());
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, want);
  }
}

TEST_P(SpmReferenceTest, MegatronFlavorAddsAndMatchesSpecialTokens) {
  const nlohmann::json expected = Expected();
  auto tok = SentencePieceTokenizer::Load(Model(), Flavor::kMegatron, 0);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->vocab_size(), expected.at("megatron_vocab_size").get<int64_t>());
  EXPECT_EQ((*tok)->eod(), expected.at("megatron_eod").get<int32_t>());
  ExpectMatchesReference(**tok, expected, "megatron_ids", /*decoded=*/false);

  auto extra = SentencePieceTokenizer::Load(Model(), Flavor::kMegatron, 3);
  ASSERT_TRUE(extra.ok()) << extra.status();
  EXPECT_EQ((*extra)->vocab_size(), expected.at("megatron_extra_vocab_size").get<int64_t>());
  ExpectMatchesReference(**extra, expected, "megatron_extra_ids", /*decoded=*/false);
}

INSTANTIATE_TEST_SUITE_P(Models, SpmReferenceTest,
                         ::testing::Values("spm_unigram_nfkc", "spm_bpe_byte_fallback",
                                           "spm_mistral_v1"));

TEST(SentencePieceTokenizerTest, WordByWordEncodingIsUsedOnlyWhereTheModelAllowsIt) {
  // Identity rules without whitespace removal: the reference tests above then
  // check the word-by-word path; NFKC rules remove extra spaces: whole texts.
  for (const auto& [model, by_words] :
       {std::pair{"spm_mistral_v1", true}, std::pair{"spm_bpe_byte_fallback", true},
        std::pair{"spm_unigram_nfkc", false}}) {
    auto tok = SentencePieceTokenizer::Load(
        TokenizerFixture(std::string(model) + "/tokenizer.model"), Flavor::kGpt, 0);
    ASSERT_TRUE(tok.ok()) << tok.status();
    EXPECT_EQ((*tok)->encodes_by_words(), by_words) << model;
  }
}

TEST(SentencePieceTokenizerTest, MegatronDetokenizeSpellsSpecialTokensWithSpaces) {
  auto tok = SentencePieceTokenizer::Load(TokenizerFixture("spm_mistral_v1/tokenizer.model"),
                                          Flavor::kMegatron, 0);
  ASSERT_TRUE(tok.ok()) << tok.status();
  auto ids = (*tok)->Tokenize("Hello<EOD>world");
  ASSERT_TRUE(ids.ok()) << ids.status();
  auto text = (*tok)->Detokenize(*ids);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "Hello <EOD> world");  // Megatron's detokenize pads them so
}

TEST(SentencePieceTokenizerErrorsTest, MissingAndMalformedModelsAreNamed) {
  const std::string dir = FreshDir("spm_errors");
  auto missing = SentencePieceTokenizer::Load(dir + "/none.model", Flavor::kGpt, 0);
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr(dir + "/none.model"));
  const std::string bad = dir + "/bad.model";
  std::ofstream(bad) << "not a protobuf at all";
  auto malformed = SentencePieceTokenizer::Load(bad, Flavor::kGpt, 0);
  ASSERT_FALSE(malformed.ok());
  EXPECT_THAT(malformed.status().message(), HasSubstr(bad + ": not a SentencePiece model"));
}

TEST(SentencePieceTokenizerErrorsTest, InvalidUtf8IsRefused) {
  auto tok = SentencePieceTokenizer::Load(TokenizerFixture("spm_mistral_v1/tokenizer.model"),
                                          Flavor::kGpt, 0);
  ASSERT_TRUE(tok.ok()) << tok.status();
  auto ids = (*tok)->Tokenize("abc\xFF");
  ASSERT_FALSE(ids.ok());
  EXPECT_THAT(ids.status().message(), HasSubstr("byte offset 3"));
}

}  // namespace
}  // namespace conveyor
