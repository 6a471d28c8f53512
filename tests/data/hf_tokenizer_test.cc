// HfTokenizer against the Hugging Face `tokenizers` library: the ids and
// decoded texts in each fixture's expected.json were written by it
// (tools/gen_tokenizer_refs.py) for the hard corpus there.
#include "data/tokenizers/hf_tokenizer.h"

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

class HfReferenceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(HfReferenceTest, EveryTextGetsTheLibrarysIdsAndDecodesAsItDoes) {
  const std::string folder = TokenizerFixture(GetParam());
  absl::StatusOr<std::unique_ptr<HfTokenizer>> tok = HfTokenizer::Load(folder);
  ASSERT_TRUE(tok.ok()) << tok.status();
  const nlohmann::json expected = ReadFixtureJson(folder + "/expected.json");
  EXPECT_EQ((*tok)->vocab_size(), expected.at("vocab_size").get<int64_t>());
  EXPECT_EQ((*tok)->eod(), expected.at("eod").get<int32_t>());
  EXPECT_GE(ExpectMatchesReference(**tok, expected), 30);
}

INSTANTIATE_TEST_SUITE_P(Files, HfReferenceTest,
                         ::testing::Values("hf_gpt2", "hf_neox_prefix_space", "hf_llama3",
                                           "hf_qwen2", "hf_llama2_spm_bpe", "hf_metaspace_bpe",
                                           "hf_metaspace_split_bpe", "hf_other_components"));

TEST(HfTokenizerTest, LoadsTheFileItselfAsWellAsItsFolder) {
  absl::StatusOr<std::unique_ptr<HfTokenizer>> tok =
      HfTokenizer::Load(TokenizerFixture("hf_gpt2/tokenizer.json"));
  ASSERT_TRUE(tok.ok()) << tok.status();
}

TEST(HfTokenizerTest, EodIsTheEosTokenOfTokenizerConfigJson) {
  // Qwen2 instruct models end documents with <|im_end|>, named only there.
  const std::string dir = FreshDir("hf_eos");
  std::ifstream in(TokenizerFixture("hf_qwen2/tokenizer.json"));
  std::ofstream(dir + "/tokenizer.json") << in.rdbuf();
  std::ofstream(dir + "/tokenizer_config.json") << R"({"eos_token": {"content": "<|im_end|>"}})";
  const nlohmann::json spec = ReadFixtureJson(dir + "/tokenizer.json");
  int32_t im_end = -1;
  for (const nlohmann::json& t : spec.at("added_tokens")) {
    if (t.at("content") == "<|im_end|>") im_end = t.at("id").get<int32_t>();
  }
  ASSERT_GE(im_end, 0);
  for (const std::string& path : {dir, dir + "/tokenizer.json"}) {
    auto tok = HfTokenizer::Load(path);
    ASSERT_TRUE(tok.ok()) << tok.status();
    EXPECT_EQ((*tok)->eod(), im_end) << path;
  }
}

TEST(HfTokenizerTest, RoundTripsTheCorpusExactly) {
  // Byte-level BPE without a prefix space or template loses nothing.
  const std::string folder = TokenizerFixture("hf_qwen2");
  auto tok = HfTokenizer::Load(folder);
  ASSERT_TRUE(tok.ok()) << tok.status();
  for (const nlohmann::json& c : ReadFixtureJson(folder + "/expected.json").at("cases")) {
    const std::string text = c.at("text").get<std::string>();
    auto ids = (*tok)->Tokenize(text);
    ASSERT_TRUE(ids.ok()) << ids.status();
    auto back = (*tok)->Detokenize(*ids);
    ASSERT_TRUE(back.ok()) << back.status();
    // NFC changes combining sequences; the reference decoded text says what comes back.
    EXPECT_EQ(*back, c.at("decoded").get<std::string>());
  }
}

std::string WriteFile(const std::string& dir, const std::string& name, const std::string& text) {
  const std::string path = dir + "/" + name;
  std::ofstream(path) << text;
  return path;
}

std::string LoadError(const std::string& path) {
  absl::StatusOr<std::unique_ptr<HfTokenizer>> tok = HfTokenizer::Load(path);
  EXPECT_FALSE(tok.ok());
  return tok.ok() ? "" : std::string(tok.status().message());
}

TEST(HfTokenizerErrorsTest, MissingFileIsNamed) {
  const std::string dir = FreshDir("hf_missing");
  EXPECT_THAT(LoadError(dir), HasSubstr(dir + "/tokenizer.json"));
}

TEST(HfTokenizerErrorsTest, MalformedJsonIsNamedWithThePosition) {
  const std::string path = WriteFile(FreshDir("hf_malformed"), "tokenizer.json", "{\"model\": ");
  const std::string error = LoadError(path);
  EXPECT_THAT(error, HasSubstr(path));
  EXPECT_THAT(error, HasSubstr("not valid JSON"));
}

TEST(HfTokenizerErrorsTest, UnsupportedComponentsAreNamed) {
  const std::string dir = FreshDir("hf_unsupported");
  EXPECT_THAT(LoadError(WriteFile(dir, "wordpiece.json",
                                  R"({"model": {"type": "WordPiece", "vocab": {}}})")),
              HasSubstr("model type 'WordPiece' is not supported"));
  EXPECT_THAT(LoadError(WriteFile(dir, "bert_pre.json",
                                  R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
                              "pre_tokenizer": {"type": "BertPreTokenizer"}})")),
              HasSubstr("pre-tokenizer type 'BertPreTokenizer' is not supported"));
  EXPECT_THAT(LoadError(WriteFile(dir, "nmt.json",
                                  R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
                              "normalizer": {"type": "Nmt"}})")),
              HasSubstr("normalizer type 'Nmt' is not supported"));
  EXPECT_THAT(LoadError(WriteFile(dir, "no_model.json", R"({"version": "1.0"})")),
              HasSubstr("not a Hugging Face tokenizer.json"));
  EXPECT_THAT(LoadError(WriteFile(dir, "bad_type.json",
                                  R"({"model": {"type": "BPE", "vocab": {"a": "zero"},
                                      "merges": []}})")),
              HasSubstr("malformed"));
}

TEST(HfTokenizerErrorsTest, AStrayHugeIdIsRefusedBeforeAnyAllocation) {
  const std::string path =
      WriteFile(FreshDir("hf_huge_id"), "tokenizer.json",
                R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 2000000000}, "merges": []}})");
  EXPECT_THAT(LoadError(path), HasSubstr("id 2000000000 of 'b' is not in [0, 4100)"));
}

TEST(HfTokenizerErrorsTest, InvalidUtf8TextIsRefusedWithItsOffset) {
  auto tok = HfTokenizer::Load(TokenizerFixture("hf_gpt2"));
  ASSERT_TRUE(tok.ok()) << tok.status();
  absl::StatusOr<std::vector<int32_t>> ids = (*tok)->Tokenize("ok \xC3\x28 bad");
  ASSERT_FALSE(ids.ok());
  EXPECT_THAT(ids.status().message(), HasSubstr("not valid UTF-8"));
  EXPECT_THAT(ids.status().message(), HasSubstr("byte offset 3"));
}

}  // namespace
}  // namespace conveyor
