#include "data/tokenizers/gpt2_bpe_tokenizer.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "data/tokenizers/gpt2_pretokenizer.h"
#include "gtest/gtest.h"
#include "tests/data/shared_data.h"
#include "tests/util/test_dirs.h"

namespace conveyor {
namespace {

using ::conveyor::testing_util::FreshDir;
using ::conveyor::testing_util::ReadFileOrDie;
using ::conveyor::testing_util::TestDataDir;

const Gpt2BpeTokenizer& Tok() {
  static const Gpt2BpeTokenizer* const tok = [] {
    const std::string dir = TestDataDir() + "/gpt2";
    auto t = Gpt2BpeTokenizer::Load(dir + "/vocab.json", dir + "/merges.txt");
    if (!t.ok()) {
      ADD_FAILURE() << t.status();
      std::abort();
    }
    return t->release();
  }();
  return *tok;
}

TEST(Gpt2BpeTokenizerTest, VocabularyShape) {
  EXPECT_EQ(Tok().vocab_size(), 50257);
  EXPECT_EQ(Tok().eod(), 50256);
}

TEST(Gpt2BpeTokenizerTest, MatchesEveryCheckedExample) {
  const std::string lines = ReadFileOrDie(TestDataDir() + "/gpt2/tokenization-examples.jsonl");
  int checked = 0;
  for (absl::string_view line : absl::StrSplit(lines, '\n', absl::SkipWhitespace())) {
    auto example = ParseJson(line);
    ASSERT_TRUE(example.ok()) << example.status();
    const std::string& text = (*example)["text"].get<std::string>();
    auto ids = Tok().Tokenize(text);
    ASSERT_TRUE(ids.ok()) << ids.status();
    std::vector<int64_t> got(ids->begin(), ids->end());
    EXPECT_EQ(got, (*example)["ids"].get<std::vector<int64_t>>()) << text;
    auto back = Tok().Detokenize(*ids);
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, text);
    ++checked;
  }
  EXPECT_EQ(checked, 10);
}

TEST(Gpt2BpeTokenizerTest, RoundTripsArbitraryBytes) {
  std::string text;
  for (int b = 0; b < 256; ++b) text.push_back(char(b));
  text += " mixed \xF0\x9F\x9A\x80 text\r\n\t ";
  auto ids = Tok().Tokenize(text);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*Tok().Detokenize(*ids), text);
  // Repeated calls (served from the cache) agree.
  EXPECT_EQ(*Tok().Tokenize(text), *ids);
}

TEST(Gpt2BpeTokenizerTest, EodDecodesAsItsText) {
  EXPECT_EQ(*Tok().Detokenize({15496, 50256}), "Hello<|endoftext|>");
  EXPECT_FALSE(Tok().Detokenize({50257}).ok());
}

TEST(Gpt2BpeTokenizerTest, MissingFilesAreNamed) {
  auto t = Gpt2BpeTokenizer::Load("/nonexistent/vocab.json", "/nonexistent/merges.txt");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(std::string(t.status().message()).find("/nonexistent/vocab.json"), std::string::npos);
  // A directory in place of the merges file (it used to read as an empty file).
  const std::string dir = FreshDir("bpe");
  auto merges_dir = Gpt2BpeTokenizer::Load(TestDataDir() + "/gpt2/vocab.json", dir);
  ASSERT_FALSE(merges_dir.ok());
  EXPECT_EQ(merges_dir.status().message(), dir + " is a directory, not a file");
}

TEST(Gpt2PreTokenizeTest, SplitsLikeGpt2Pattern) {
  auto split = [](absl::string_view s) {
    std::vector<std::string> out;
    for (absl::string_view p : Gpt2PreTokenize(s)) out.emplace_back(p);
    return out;
  };
  EXPECT_EQ(split("It's  a test!!  "),
            (std::vector<std::string>{"It", "'s", " ", " a", " test", "!!", "  "}));
  EXPECT_EQ(split("x 12ab\n\n y"), (std::vector<std::string>{"x", " 12", "ab", "\n\n", " y"}));
  EXPECT_EQ(split("we'll they're"), (std::vector<std::string>{"we", "'ll", " they", "'re"}));
}

}  // namespace
}  // namespace conveyor
