#include "tests/data/tokenizer_fixtures.h"

#include <cstdlib>
#include <fstream>
#include <vector>

#include "gtest/gtest.h"

namespace conveyor::testing_util {

std::string TokenizerFixture(const std::string& name) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  if (srcdir == nullptr || workspace == nullptr) {
    std::fprintf(stderr, "FATAL: TEST_SRCDIR unset: run this test through bazel\n");
    std::abort();
  }
  return std::string(srcdir) + "/" + workspace + "/tests/data/fixtures/tokenizers/" + name;
}

nlohmann::json ReadFixtureJson(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "FATAL: cannot read %s\n", path.c_str());
    std::abort();
  }
  return nlohmann::json::parse(in);
}

int ExpectMatchesReference(const Tokenizer& tokenizer, const nlohmann::json& expected,
                           const std::string& ids_key, bool decoded) {
  int checked = 0;
  for (const nlohmann::json& c : expected.at("cases")) {
    const std::string text = c.at("text").get<std::string>();
    const std::vector<int32_t> want = c.at(ids_key).get<std::vector<int32_t>>();
    absl::StatusOr<std::vector<int32_t>> got = tokenizer.Tokenize(text);
    EXPECT_TRUE(got.ok()) << got.status() << "\ntext: " << text;
    if (got.ok()) {
      EXPECT_EQ(*got, want) << "text: " << text;
    }
    if (decoded) {
      absl::StatusOr<std::string> back = tokenizer.Detokenize(want);
      EXPECT_TRUE(back.ok()) << back.status();
      if (back.ok()) {
        EXPECT_EQ(*back, c.at("decoded").get<std::string>()) << "ids of text: " << text;
      }
      if (c.contains("half_ids")) {
        absl::StatusOr<std::string> half =
            tokenizer.Detokenize(c.at("half_ids").get<std::vector<int32_t>>());
        EXPECT_TRUE(half.ok()) << half.status();
        if (half.ok()) {
          EXPECT_EQ(*half, c.at("half_decoded").get<std::string>()) << "half of text: " << text;
        }
      }
    }
    ++checked;
  }
  return checked;
}

}  // namespace conveyor::testing_util
