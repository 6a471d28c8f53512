#include "data/tokenizers/simple_tokenizers.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace conveyor {
namespace {

TEST(NullTokenizerTest, ParsesIdsLikeMegatron) {
  NullTokenizer tok(1000);
  EXPECT_EQ(tok.vocab_size(), 1001);
  EXPECT_EQ(tok.eod(), 1000);
  auto ids = tok.Tokenize("5 17  999\n0");
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ(*ids, (std::vector<int32_t>{5, 17, 999, 0}));
  EXPECT_EQ(*tok.Detokenize(*ids), "5 17 999 0");
}

TEST(NullTokenizerTest, RejectsNonIds) {
  NullTokenizer tok(1000);
  auto bad = tok.Tokenize("5 x7");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("'x7'"), std::string::npos);
  EXPECT_FALSE(tok.Tokenize("1001").ok());
  EXPECT_FALSE(tok.Tokenize("-1").ok());
}

TEST(ByteTokenizerTest, RoundTripsBytes) {
  ByteTokenizer tok;
  EXPECT_EQ(tok.vocab_size(), 257);
  EXPECT_EQ(tok.eod(), 256);
  const std::string text("caf\xC3\xA9\0\xFF", 7);  // with a NUL byte
  auto ids = tok.Tokenize(text);
  ASSERT_TRUE(ids.ok());
  ASSERT_EQ(ids->size(), 7u);
  EXPECT_EQ((*ids)[5], 0);
  EXPECT_EQ((*ids)[6], 0xFF);
  EXPECT_EQ((*ids)[3], 0xC3);
  std::vector<int32_t> with_eod = *ids;
  with_eod.push_back(tok.eod());
  EXPECT_EQ(*tok.Detokenize(with_eod), text);
  EXPECT_FALSE(tok.Detokenize({300}).ok());
}

}  // namespace
}  // namespace conveyor
