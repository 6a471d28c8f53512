#include "data/python_json.h"

#include <cmath>
#include <string>
#include <vector>

#include "data/tokenizers/utf8_text.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace conveyor {
namespace {

using ::testing::HasSubstr;

std::string ErrorOf(absl::string_view text) {
  absl::StatusOr<Json> v = ParseJson(text);
  EXPECT_FALSE(v.ok()) << text;
  return v.ok() ? "" : std::string(v.status().message());
}

std::vector<std::string> Keys(const Json& object) {
  std::vector<std::string> keys;
  for (const auto& member : object.items()) keys.push_back(member.key());
  return keys;
}

TEST(PythonJsonTest, RepeatedKeyKeepsItsFirstPlaceAndTakesTheLastValue) {
  // Python: json.loads('{"a": 1, "b": 2, "a": 3}') == {"a": 3, "b": 2}.
  absl::StatusOr<Json> v = ParseJson(R"({"a": 1, "b": 2, "a": 3})");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(Keys(*v), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ((*v)["a"].get<int64_t>(), 3);
  EXPECT_EQ((*v)["b"].get<int64_t>(), 2);
}

TEST(PythonJsonTest, RepeatedKeyInALargeObject) {
  // A key given again far from its first place.
  std::string text = "{";
  for (int i = 0; i < 40; ++i) text += "\"k" + std::to_string(i) + "\": " + std::to_string(i) + ",";
  text += "\"k3\": \"again\", \"k39\": -1, \"last\": 0}";
  absl::StatusOr<Json> v = ParseJson(text);
  ASSERT_TRUE(v.ok()) << v.status();
  ASSERT_EQ(v->size(), 41u);
  const std::vector<std::string> keys = Keys(*v);
  EXPECT_EQ(keys[3], "k3");
  EXPECT_EQ((*v)["k3"].get<std::string>(), "again");
  EXPECT_EQ((*v)["k39"].get<int64_t>(), -1);
  EXPECT_EQ(keys[40], "last");
}

TEST(PythonJsonTest, Utf8SequenceLengthFollowsPythonsStrictDecoder) {
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

TEST(PythonJsonTest, FindInvalidUtf8GivesTheOffset) {
  EXPECT_EQ(FindInvalidUtf8("plain \xC3\xA9 \xF0\x9F\x9A\x80"), absl::string_view::npos);
  EXPECT_EQ(FindInvalidUtf8("bad \xFF\xFE"), 4u);
  EXPECT_EQ(FindInvalidUtf8("\xC3\xA9\xE8\xA1"), 2u);
}

TEST(PythonJsonTest, InvalidUtf8InAStringIsAnError) {
  EXPECT_EQ(ErrorOf("{\"text\":\"bad \xff\xfe\"}"), "JSON: invalid UTF-8 (byte 0xFF) at byte 13");
  absl::StatusOr<Json> v = ParseJson("\"\xE8\xA1\x8C \xF0\x9F\x9A\x80\"");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->get<std::string>(), "\xE8\xA1\x8C \xF0\x9F\x9A\x80");
}

TEST(PythonJsonTest, ByteOrderMarkIsNamed) {
  EXPECT_EQ(ErrorOf("\xEF\xBB\xBF{}"),
            "JSON: UTF-8 byte-order mark (EF BB BF), which JSON text must not start with at byte "
            "0");
}

TEST(PythonJsonTest, SurrogatePairsJoinAndHalvesAreRefused) {
  absl::StatusOr<Json> v = ParseJson(R"("\ud83d\ude80 \u00e9")");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->get<std::string>(), "\xF0\x9F\x9A\x80 \xC3\xA9");
  EXPECT_THAT(ErrorOf(R"(["ok", "\ud800x"])"),
              HasSubstr("\\ud800 is half of a UTF-16 surrogate pair without its other half, "
                        "which no UTF-8 text can hold at byte 8"));
  EXPECT_THAT(ErrorOf(R"("\udc00")"), HasSubstr("\\udc00 is half"));
  EXPECT_THAT(ErrorOf(R"("\ud800\u0041")"), HasSubstr("\\ud800 is half"));
}

TEST(PythonJsonTest, NumbersFollowJsonsGrammarPlusPythonsWords) {
  absl::StatusOr<Json> v =
      ParseJson("[0, -12, 1.5e+3, -0.25, 9007199254740993, NaN, Infinity, -Infinity]");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ((*v)[0].get<int64_t>(), 0);
  EXPECT_EQ((*v)[1].get<int64_t>(), -12);
  EXPECT_EQ((*v)[2].get<double>(), 1500.0);
  EXPECT_EQ((*v)[3].get<double>(), -0.25);
  EXPECT_EQ((*v)[4].get<int64_t>(), 9007199254740993);  // above 2^53: kept exactly
  EXPECT_TRUE(std::isnan((*v)[5].get<double>()));
  EXPECT_EQ((*v)[6].get<double>(), HUGE_VAL);
  EXPECT_EQ((*v)[7].get<double>(), -HUGE_VAL);
  // Each refused by Python's json.loads too.
  EXPECT_EQ(ErrorOf("+1"), "JSON: unexpected character at byte 0");
  EXPECT_EQ(ErrorOf("[1.]"), "JSON: malformed number at byte 3");
  EXPECT_EQ(ErrorOf("[.5]"), "JSON: unexpected character at byte 1");
  EXPECT_EQ(ErrorOf("[1e]"), "JSON: malformed number at byte 3");
  EXPECT_EQ(ErrorOf("[-]"), "JSON: malformed number at byte 2");
  EXPECT_EQ(ErrorOf("[01]"), "JSON: expected ',' or ']' at byte 2");
}

TEST(PythonJsonTest, PythonsNumberWordsOnlyWhereAValueStarts) {
  // Python: json.loads('{"NaN": "Infinity", "x": [1e400, -1e400, 2, NaN]}').
  absl::StatusOr<Json> v = ParseJson(R"({"NaN": "Infinity", "x": [1e400, -1e400, 2, NaN]})");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ((*v)["NaN"].get<std::string>(), "Infinity");
  EXPECT_EQ((*v)["x"][0].get<double>(), HUGE_VAL);
  EXPECT_EQ((*v)["x"][1].get<double>(), -HUGE_VAL);
  EXPECT_EQ((*v)["x"][2].get<int64_t>(), 2);
  EXPECT_TRUE(std::isnan((*v)["x"][3].get<double>()));
  // Refused by Python too.
  EXPECT_EQ(ErrorOf("[-NaN]"), "JSON: malformed number at byte 2");
  EXPECT_EQ(ErrorOf("[1NaN]"), "JSON: unexpected character at byte 2");
}

TEST(PythonJsonTest, ErrorsNameTheProblemWhereItStarts) {
  EXPECT_EQ(ErrorOf(R"({"text": "unterminated})"), "JSON: unterminated string at byte 23");
  EXPECT_EQ(ErrorOf("[1] 2"), "JSON: trailing characters at byte 4");
  EXPECT_EQ(ErrorOf("[1] x"), "JSON: trailing characters at byte 4");
  EXPECT_EQ(ErrorOf(R"({"a" 1})"), "JSON: expected ':' at byte 5");
  EXPECT_EQ(ErrorOf("{1: 2}"), "JSON: expected a string key at byte 1");
  EXPECT_EQ(ErrorOf(R"({"a": 1 "b": 2})"), "JSON: expected ',' or '}' at byte 8");
  EXPECT_EQ(ErrorOf("[1,]"), "JSON: unexpected character at byte 3");
  EXPECT_EQ(ErrorOf("[1, "), "JSON: unexpected end of input at byte 4");
  EXPECT_EQ(ErrorOf(R"(["a\q"])"), "JSON: bad escape at byte 4");
}

TEST(PythonJsonTest, UnorderedObjectsTakeTheLastValueToo) {
  absl::StatusOr<nlohmann::json> v = ParseJson<nlohmann::json>(R"({"b": 1, "a": 2, "b": 3})");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->size(), 2u);
  EXPECT_EQ((*v)["b"].get<int64_t>(), 3);
}

TEST(PythonJsonTest, MembersAreFoundOrNull) {
  absl::StatusOr<Json> v = ParseJson(R"({"a": {"b": 1}})");
  ASSERT_TRUE(v.ok()) << v.status();
  ASSERT_NE(FindMember(*v, "a"), nullptr);
  EXPECT_EQ(FindMember(*v, "b"), nullptr);
  EXPECT_EQ(FindMember((*v)["a"]["b"], "b"), nullptr);  // not an object
  EXPECT_EQ(MemberOrNull(MemberOrNull(*v, "a"), "b").get<int64_t>(), 1);
  EXPECT_TRUE(MemberOrNull(MemberOrNull(*v, "x"), "b").is_null());
}

TEST(PythonJsonTest, ReadsOfAnotherTypeGiveZeroFalseOrEmpty) {
  absl::StatusOr<Json> v = ParseJson(R"([7, 2.75, true, "s", null, [1], {"a": 1}])");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(AsInt64((*v)[0]), 7);
  EXPECT_EQ(AsInt64((*v)[1]), 2);  // truncated, as a cast
  EXPECT_EQ(AsDouble((*v)[1]), 2.75);
  EXPECT_TRUE(AsBool((*v)[2]));
  EXPECT_EQ(AsString((*v)[3]), "s");
  for (size_t i : {2, 3, 4, 5, 6}) EXPECT_EQ(AsInt64((*v)[i]), 0) << i;
  for (size_t i : {2, 3, 4, 5, 6}) EXPECT_EQ(AsDouble((*v)[i]), 0.0) << i;
  for (size_t i : {0, 1, 3, 4, 5, 6}) EXPECT_FALSE(AsBool((*v)[i])) << i;
  for (size_t i : {0, 1, 2, 4, 5, 6}) EXPECT_EQ(AsString((*v)[i]), "") << i;
}

}  // namespace
}  // namespace conveyor
