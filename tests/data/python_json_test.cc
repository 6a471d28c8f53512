#include "data/json_lite.h"
#include "data/utf8_text.h"

#include <cmath>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace conveyor {
namespace {

using ::testing::HasSubstr;

std::string ErrorOf(absl::string_view text) {
  absl::StatusOr<JsonValue> v = ParseJson(text);
  EXPECT_FALSE(v.ok()) << text;
  return v.ok() ? "" : std::string(v.status().message());
}

std::vector<std::string> Keys(const JsonValue& object) {
  std::vector<std::string> keys;
  for (const auto& [key, value] : object.object()) keys.push_back(key);
  return keys;
}

TEST(JsonLiteTest, RepeatedKeyKeepsItsFirstPlaceAndTakesTheLastValue) {
  // Python: json.loads('{"a": 1, "b": 2, "a": 3}') == {"a": 3, "b": 2}.
  absl::StatusOr<JsonValue> v = ParseJson(R"({"a": 1, "b": 2, "a": 3})");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(Keys(*v), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ((*v)["a"].integer(), 3);
  EXPECT_EQ((*v)["b"].integer(), 2);
}

TEST(JsonLiteTest, RepeatedKeyInALargeObject) {
  // Past the members scanned one by one, the object is indexed.
  std::string text = "{";
  for (int i = 0; i < 40; ++i) text += "\"k" + std::to_string(i) + "\": " + std::to_string(i) + ",";
  text += "\"k3\": \"again\", \"k39\": -1, \"last\": 0}";
  absl::StatusOr<JsonValue> v = ParseJson(text);
  ASSERT_TRUE(v.ok()) << v.status();
  ASSERT_EQ(v->size(), 41u);
  EXPECT_EQ(v->object()[3].first, "k3");
  EXPECT_EQ(v->object()[3].second.str(), "again");
  EXPECT_EQ((*v)["k39"].integer(), -1);
  EXPECT_EQ(v->object()[40].first, "last");
}

TEST(JsonLiteTest, Utf8SequenceLengthFollowsPythonsStrictDecoder) {
  EXPECT_EQ(Utf8SequenceLength("a"), 1);
  EXPECT_EQ(Utf8SequenceLength("\xC3\xA9"), 2);          // é
  EXPECT_EQ(Utf8SequenceLength("\xE8\xA1\x8C"), 3);      // 行
  EXPECT_EQ(Utf8SequenceLength("\xF0\x9F\x9A\x80"), 4);  // 🚀
  EXPECT_EQ(Utf8SequenceLength("\xF4\x8F\xBF\xBF"), 4);  // U+10FFFF
  EXPECT_EQ(Utf8SequenceLength(""), 0);
  EXPECT_EQ(Utf8SequenceLength("\xFF"), 0);              // never in UTF-8
  EXPECT_EQ(Utf8SequenceLength("\x80"), 0);              // continuation byte first
  EXPECT_EQ(Utf8SequenceLength("\xC0\xAF"), 0);          // overlong '/'
  EXPECT_EQ(Utf8SequenceLength("\xE0\x80\xAF"), 0);      // overlong '/'
  EXPECT_EQ(Utf8SequenceLength("\xF0\x80\x80\xAF"), 0);  // overlong '/'
  EXPECT_EQ(Utf8SequenceLength("\xED\xA0\x80"), 0);      // surrogate U+D800
  EXPECT_EQ(Utf8SequenceLength("\xF4\x90\x80\x80"), 0);  // U+110000
  EXPECT_EQ(Utf8SequenceLength("\xE8\xA1"), 0);          // truncated
  EXPECT_EQ(Utf8SequenceLength("\xC3\x41"), 0);          // bad continuation
}

TEST(JsonLiteTest, FindInvalidUtf8GivesTheOffset) {
  EXPECT_EQ(FindInvalidUtf8("plain \xC3\xA9 \xF0\x9F\x9A\x80"), absl::string_view::npos);
  EXPECT_EQ(FindInvalidUtf8("bad \xFF\xFE"), 4u);
  EXPECT_EQ(FindInvalidUtf8("\xC3\xA9\xE8\xA1"), 2u);
}

TEST(JsonLiteTest, InvalidUtf8InAStringIsAnError) {
  EXPECT_EQ(ErrorOf("{\"text\":\"bad \xff\xfe\"}"), "JSON: invalid UTF-8 (byte 0xFF) at byte 13");
  absl::StatusOr<JsonValue> v = ParseJson("\"\xE8\xA1\x8C \xF0\x9F\x9A\x80\"");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->str(), "\xE8\xA1\x8C \xF0\x9F\x9A\x80");
}

TEST(JsonLiteTest, ByteOrderMarkIsNamed) {
  EXPECT_EQ(ErrorOf("\xEF\xBB\xBF{}"),
            "JSON: UTF-8 byte-order mark (EF BB BF), which JSON text must not start with at byte "
            "0");
}

TEST(JsonLiteTest, SurrogatePairsJoinAndHalvesAreRefused) {
  absl::StatusOr<JsonValue> v = ParseJson(R"("\ud83d\ude80 \u00e9")");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->str(), "\xF0\x9F\x9A\x80 \xC3\xA9");
  EXPECT_THAT(ErrorOf(R"(["ok", "\ud800x"])"),
              HasSubstr("\\ud800 is half of a UTF-16 surrogate pair without its other half, "
                        "which no UTF-8 text can hold at byte 8"));
  EXPECT_THAT(ErrorOf(R"("\udc00")"), HasSubstr("\\udc00 is half"));
  EXPECT_THAT(ErrorOf(R"("\ud800\u0041")"), HasSubstr("\\ud800 is half"));
}

TEST(JsonLiteTest, NumbersFollowJsonsGrammarPlusPythonsWords) {
  absl::StatusOr<JsonValue> v =
      ParseJson("[0, -12, 1.5e+3, -0.25, 9007199254740993, NaN, Infinity, -Infinity]");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ((*v)[0].integer(), 0);
  EXPECT_EQ((*v)[1].integer(), -12);
  EXPECT_EQ((*v)[2].number(), 1500.0);
  EXPECT_EQ((*v)[3].number(), -0.25);
  EXPECT_EQ((*v)[4].integer(), 9007199254740993);  // above 2^53: kept exactly
  EXPECT_TRUE(std::isnan((*v)[5].number()));
  EXPECT_EQ((*v)[6].number(), HUGE_VAL);
  EXPECT_EQ((*v)[7].number(), -HUGE_VAL);
  // Each refused by Python's json.loads too.
  EXPECT_EQ(ErrorOf("+1"), "JSON: unexpected character at byte 0");
  EXPECT_EQ(ErrorOf("[1.]"), "JSON: malformed number at byte 3");
  EXPECT_EQ(ErrorOf("[.5]"), "JSON: unexpected character at byte 1");
  EXPECT_EQ(ErrorOf("[1e]"), "JSON: malformed number at byte 3");
  EXPECT_EQ(ErrorOf("[-]"), "JSON: malformed number at byte 2");
  EXPECT_EQ(ErrorOf("[01]"), "JSON: expected ',' or ']' at byte 2");
}

}  // namespace
}  // namespace conveyor
