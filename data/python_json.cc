#include "data/python_json.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "data/tokenizers/utf8_text.h"

namespace conveyor {
namespace {

// Numbers by their place among the text's numbers (0 for the first).
using SpecialValues = absl::flat_hash_map<size_t, double>;

// The text with each of Python's number words (NaN, Infinity, -Infinity,
// which json.dumps writes for float nan and inf) and each literal past the
// double range replaced by a 0 padded with spaces to the same length, so that
// byte offsets do not move; nlohmann-json, following RFC 8259, refuses both.
struct SpecialNumbers {
  std::string text;  // empty when nothing was replaced
  SpecialValues values;
};

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool IsNumberChar(char c) {
  return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
}

// The offset just past the string whose opening quote is at `quote`.
size_t EndOfString(absl::string_view text, size_t quote) {
  size_t i = quote + 1;
  while (i < text.size() && text[i] != '"') i += text[i] == '\\' ? 2 : 1;
  return i + 1;
}

// The value of the number word or literal of `length` bytes at the start of
// `at`, when it is one nlohmann-json refuses and Python reads.
std::optional<double> SpecialNumber(absl::string_view at, bool word_allowed, size_t* length) {
  constexpr double kInfinity = std::numeric_limits<double>::infinity();
  if (word_allowed) {
    for (const auto& [word, value] :
         {std::pair{"NaN", std::numeric_limits<double>::quiet_NaN()},
          std::pair{"Infinity", kInfinity}, std::pair{"-Infinity", -kInfinity}}) {
      *length = std::char_traits<char>::length(word);
      if (absl::StartsWith(at, word)) return value;
    }
  }
  *length = 0;
  while (*length < at.size() && IsNumberChar(at[*length])) ++*length;
  // Only an exponent or over 308 digits reach past the double range.
  const absl::string_view literal = at.substr(0, *length);
  if (*length <= 308 && !absl::StrContains(literal, 'e') && !absl::StrContains(literal, 'E')) {
    return std::nullopt;
  }
  const double value = std::strtod(std::string(literal).c_str(), nullptr);
  if (std::isinf(value)) return value;
  return std::nullopt;
}

SpecialNumbers ReplaceSpecialNumbers(absl::string_view text) {
  SpecialNumbers out;
  size_t numbers = 0;
  // A word is a number only where a value may start (so "-NaN" stays an error).
  char before = '[';
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (c == '"') {
      i = EndOfString(text, i);
      before = c;
      continue;
    }
    const bool word_allowed = before == '[' || before == ':' || before == ',';
    if (IsSpace(c) || (!IsNumberChar(c) && !(word_allowed && (c == 'N' || c == 'I')))) {
      if (!IsSpace(c)) before = c;
      ++i;
      continue;
    }
    size_t length = 0;
    const std::optional<double> value = SpecialNumber(text.substr(i), word_allowed, &length);
    if (value.has_value()) {
      if (out.text.empty()) out.text = std::string(text);
      out.text.replace(i, length, absl::StrCat("0", std::string(length - 1, ' ')));
      out.values[numbers] = *value;
    }
    numbers += length > 0 ? 1 : 0;
    before = length > 0 ? '0' : c;
    i += std::max<size_t>(length, 1);
  }
  return out;
}

// Where and why nlohmann-json stopped.
struct Failure {
  size_t position = 0;  // bytes read, the offending one included
  std::string token;    // the token being read
  std::string what;
};

// nlohmann-json's DOM builder, with the replaced numbers put back and the
// first error kept instead of thrown.
template <typename JsonType>
class PythonSax : public nlohmann::detail::json_sax_dom_parser<JsonType> {
  using Base = nlohmann::detail::json_sax_dom_parser<JsonType>;

 public:
  PythonSax(JsonType& result, const SpecialValues& special)
      : Base(result, /*allow_exceptions_=*/false), special_(special) {}

  bool number_integer(typename JsonType::number_integer_t v) {
    const std::optional<double> special = Special();
    return special ? Base::number_float(*special, "") : Base::number_integer(v);
  }
  bool number_unsigned(typename JsonType::number_unsigned_t v) {
    const std::optional<double> special = Special();
    return special ? Base::number_float(*special, "") : Base::number_unsigned(v);
  }
  bool number_float(typename JsonType::number_float_t v, const typename JsonType::string_t& s) {
    const std::optional<double> special = Special();
    return special ? Base::number_float(*special, "") : Base::number_float(v, s);
  }
  template <class Exception>
  bool parse_error(std::size_t position, const std::string& token, const Exception& e) {
    failure_ = Failure{position, token, e.what()};
    return false;
  }
  const Failure& failure() const { return failure_; }

 private:
  // The value the number at this place stood for, if it was replaced.
  std::optional<double> Special() {
    const auto it = special_.find(numbers_++);
    if (it == special_.end()) return std::nullopt;
    return it->second;
  }

  const SpecialValues& special_;
  size_t numbers_ = 0;
  Failure failure_;
};

absl::Status JsonError(absl::string_view what, size_t at) {
  return absl::InvalidArgumentError(absl::StrCat("JSON: ", what, " at byte ", at));
}

// The code point of the four hex digits at text[at], or 0 when they are not.
uint32_t Hex4(absl::string_view text, size_t at) {
  if (at + 4 > text.size()) return 0;
  return static_cast<uint32_t>(std::strtoul(std::string(text.substr(at, 4)).c_str(), nullptr, 16));
}

bool IsLowSurrogate(uint32_t cp) { return cp >= 0xDC00 && cp < 0xE000; }

// The first \u escape of half a surrogate pair. Every backslash before the
// point where nlohmann-json stopped is inside a string, so the scan may start
// at the beginning of the text.
absl::Status HalfSurrogateError(absl::string_view text) {
  for (size_t i = 0; i + 5 < text.size();) {
    if (text[i] != '\\' || text[i + 1] != 'u') {
      i += text[i] == '\\' ? 2 : 1;
      continue;
    }
    const uint32_t cp = Hex4(text, i + 2);
    const bool paired = cp >= 0xD800 && cp < 0xDC00 && text.substr(i + 6, 2) == "\\u" &&
                        IsLowSurrogate(Hex4(text, i + 8));
    if (paired || cp < 0xD800 || cp >= 0xE000) {
      i += paired ? 12 : 6;
      continue;
    }
    return JsonError(absl::StrFormat("\\u%04x is half of a UTF-16 surrogate pair without its "
                                     "other half, which no UTF-8 text can hold",
                                     cp),
                     i);
  }
  return JsonError("unpaired UTF-16 surrogate", text.size());
}

// Bytes from where the problem starts to where nlohmann-json stopped: 1 for
// the lexer's errors (which say what they last read: the offending byte is the
// last one) and for an unexpected structural character ("unexpected ']'"); the
// text of an unexpected literal, which the lexer keeps, for the parser's.
size_t ProblemLength(const Failure& failure) {
  const absl::string_view what = failure.what;
  if (absl::StrContains(what, "last read:")) return 1;
  const size_t unexpected = what.find("unexpected '");
  const size_t quoted = unexpected + std::strlen("unexpected '");
  if (unexpected != absl::string_view::npos && quoted + 1 < what.size() &&
      what[quoted + 1] == '\'') {
    return 1;
  }
  return failure.token.size();
}

// nlohmann-json's reason for stopping, in Conveyor's words, at the byte where
// the problem starts: the offending byte for the lexer's errors (which say
// what they last read), the offending token's start for the parser's.
absl::Status TranslateError(absl::string_view text, const Failure& failure) {
  const absl::string_view what = failure.what;
  if (absl::StrContains(what, "ill-formed UTF-8")) {
    const size_t bad = FindInvalidUtf8(text);
    return JsonError(
        absl::StrFormat("invalid UTF-8 (byte 0x%02X)", static_cast<unsigned char>(text[bad])),
        bad);
  }
  if (absl::StrContains(what, "surrogate")) return HalfSurrogateError(text);
  if (absl::StrContains(what, "unexpected end of input")) {
    return JsonError("unexpected end of input", text.size());
  }
  const size_t at = failure.position - std::min(failure.position, ProblemLength(failure));
  constexpr std::pair<absl::string_view, absl::string_view> kReasons[] = {
      {"expected end of input", "trailing characters"},
      {"invalid number", "malformed number"},
      {"missing closing quote", "unterminated string"},
      {"control character", "control character in string"},
      {"after backslash", "bad escape"},
      {"4 hex digits", "bad hex digit in \\u escape"},
      {"invalid literal", "unexpected character"},
      {"while parsing object key", "expected a string key"},
      {"while parsing object separator", "expected ':'"},
      {"while parsing object", "expected ',' or '}'"},
      {"while parsing array", "expected ',' or ']'"},
      {"while parsing value", "unexpected character"},
  };
  for (const auto& [needle, reason] : kReasons) {
    if (absl::StrContains(what, needle)) return JsonError(reason, at);
  }
  return JsonError(what, at);
}

}  // namespace

template <typename JsonType>
absl::StatusOr<JsonType> ParseJson(absl::string_view text) {
  if (absl::StartsWith(text, kUtf8Bom)) {
    return JsonError("UTF-8 byte-order mark (EF BB BF), which JSON text must not start with", 0);
  }
  const SpecialNumbers special = ReplaceSpecialNumbers(text);
  const absl::string_view parsed = special.values.empty() ? text : special.text;
  const char* begin = parsed.empty() ? "" : parsed.data();
  JsonType result;
  PythonSax<JsonType> sax(result, special.values);
  if (!JsonType::sax_parse(begin, begin + parsed.size(), &sax)) {
    return TranslateError(text, sax.failure());
  }
  return result;
}

template absl::StatusOr<nlohmann::json> ParseJson(absl::string_view text);
template absl::StatusOr<nlohmann::ordered_json> ParseJson(absl::string_view text);

const Json* FindMember(const Json& object, absl::string_view key) {
  if (!object.is_object()) return nullptr;
  const auto it = object.find(std::string(key));
  return it == object.end() ? nullptr : &*it;
}

const Json& MemberOrNull(const Json& object, absl::string_view key) {
  static const Json* const kNull = new Json();
  const Json* member = FindMember(object, key);
  return member != nullptr ? *member : *kNull;
}

int64_t AsInt64(const Json& value) { return value.is_number() ? value.get<int64_t>() : 0; }

double AsDouble(const Json& value) { return value.is_number() ? value.get<double>() : 0; }

bool AsBool(const Json& value) { return value.is_boolean() && value.get<bool>(); }

const std::string& AsString(const Json& value) {
  static const std::string* const kEmpty = new std::string();
  return value.is_string() ? value.get_ref<const std::string&>() : *kEmpty;
}

}  // namespace conveyor
