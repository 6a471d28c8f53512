#include "data/json_lite.h"

#include <cstdlib>
#include <limits>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "data/utf8_text.h"

namespace conveyor {

const JsonValue* JsonValue::Find(absl::string_view key) const {
  for (const auto& [name, value] : object_) {
    if (name == key) return &value;
  }
  return nullptr;
}

const JsonValue& JsonValue::operator[](absl::string_view key) const {
  static const JsonValue* const kNull = new JsonValue();
  const JsonValue* v = Find(key);
  return v != nullptr ? *v : *kNull;
}

std::vector<int64_t> JsonValue::IntArray() const {
  std::vector<int64_t> out;
  out.reserve(array_.size());
  for (const JsonValue& v : array_) out.push_back(v.integer());
  return out;
}

namespace {

using Members = std::vector<std::pair<std::string, JsonValue>>;

// Positions of an object's keys, kept once the object is too big to scan:
// vocabularies have 50k members, JSON-lines documents a handful.
using MemberIndex = absl::flat_hash_map<std::string, size_t>;
constexpr size_t kMembersScanned = 16;

// Adds a member as Python's dict does when json.loads builds it: a key given
// again keeps its first position and takes the new value.
void AddMember(std::string key, JsonValue value, Members* members, MemberIndex* index) {
  size_t at = members->size();
  if (members->size() <= kMembersScanned) {
    for (size_t i = 0; i < members->size(); ++i) {
      if ((*members)[i].first == key) {
        at = i;
        break;
      }
    }
  } else {
    if (index->empty()) {
      for (size_t i = 0; i < members->size(); ++i) index->emplace((*members)[i].first, i);
    }
    at = index->try_emplace(key, members->size()).first->second;
  }
  if (at < members->size()) {
    (*members)[at].second = std::move(value);
  } else {
    members->emplace_back(std::move(key), std::move(value));
  }
}

}  // namespace

// Recursive descent over the text; depth is bounded so that hostile input
// cannot overflow the stack.
class JsonParser {
 public:
  explicit JsonParser(absl::string_view text) : text_(text) {}

  absl::StatusOr<JsonValue> ParseDocument() {
    if (absl::StartsWith(text_, kUtf8Bom)) {
      return Error("UTF-8 byte-order mark (EF BB BF), which JSON text must not start with");
    }
    JsonValue v;
    RETURN_IF_ERROR(ParseValue(&v, 0));
    SkipSpace();
    if (pos_ != text_.size()) return Error("trailing characters");
    return v;
  }

 private:
  static constexpr int kMaxDepth = 256;

  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("JSON: ", what, " at byte ", pos_));
  }

  void SkipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }

  bool Consume(absl::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  absl::Status ParseValue(JsonValue* v, int depth) {
    if (depth > kMaxDepth) return Error("nesting too deep");
    SkipSpace();
    if (pos_ >= text_.size()) return Error("unexpected end of input");
    const char c = text_[pos_];
    if (c == '{') return ParseObject(v, depth);
    if (c == '[') return ParseArray(v, depth);
    if (c == '"') {
      v->type_ = JsonValue::Type::kString;
      return ParseString(&v->string_);
    }
    if (Consume("true")) {
      v->type_ = JsonValue::Type::kBool;
      v->bool_ = true;
      return absl::OkStatus();
    }
    if (Consume("false")) {
      v->type_ = JsonValue::Type::kBool;
      return absl::OkStatus();
    }
    if (Consume("null")) return absl::OkStatus();
    // Not JSON, but Python's json module reads them, and json.dumps writes
    // them for float nan and inf, so corpora made in Python can hold them.
    constexpr double kInfinity = std::numeric_limits<double>::infinity();
    for (const auto& [word, value] :
         {std::pair{"NaN", std::numeric_limits<double>::quiet_NaN()},
          std::pair{"Infinity", kInfinity}, std::pair{"-Infinity", -kInfinity}}) {
      if (Consume(word)) {
        v->type_ = JsonValue::Type::kNumber;
        v->number_ = value;
        return absl::OkStatus();
      }
    }
    return ParseNumber(v);
  }

  absl::Status ParseObject(JsonValue* v, int depth) {
    v->type_ = JsonValue::Type::kObject;
    ++pos_;  // '{'
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == '}') {
      ++pos_;
      return absl::OkStatus();
    }
    MemberIndex index;
    while (true) {
      SkipSpace();
      if (pos_ >= text_.size() || text_[pos_] != '"') {
        return Error("expected a string key");
      }
      std::string key;
      RETURN_IF_ERROR(ParseString(&key));
      SkipSpace();
      if (pos_ >= text_.size() || text_[pos_] != ':') return Error("expected ':'");
      ++pos_;
      JsonValue member;
      RETURN_IF_ERROR(ParseValue(&member, depth + 1));
      AddMember(std::move(key), std::move(member), &v->object_, &index);
      SkipSpace();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < text_.size() && text_[pos_] == '}') {
        ++pos_;
        return absl::OkStatus();
      }
      return Error("expected ',' or '}'");
    }
  }

  absl::Status ParseArray(JsonValue* v, int depth) {
    v->type_ = JsonValue::Type::kArray;
    ++pos_;  // '['
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == ']') {
      ++pos_;
      return absl::OkStatus();
    }
    while (true) {
      JsonValue element;
      RETURN_IF_ERROR(ParseValue(&element, depth + 1));
      v->array_.push_back(std::move(element));
      SkipSpace();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < text_.size() && text_[pos_] == ']') {
        ++pos_;
        return absl::OkStatus();
      }
      return Error("expected ',' or ']'");
    }
  }

  absl::Status ParseHex4(uint32_t* out) {
    if (pos_ + 4 > text_.size()) return Error("truncated \\u escape");
    uint32_t value = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = text_[pos_++];
      value <<= 4;
      if (h >= '0' && h <= '9')
        value |= h - '0';
      else if (h >= 'a' && h <= 'f')
        value |= h - 'a' + 10;
      else if (h >= 'A' && h <= 'F')
        value |= h - 'A' + 10;
      else
        return Error("bad hex digit in \\u escape");
    }
    *out = value;
    return absl::OkStatus();
  }

  // The code point of a \u escape whose "\u" was just read. A high surrogate
  // and a low one make one code point beyond the BMP (how JSON writers escape
  // emoji). Half a pair is refused: Python reads it into a str, but no UTF-8
  // text holds it, so Megatron's tokenizers fail on it.
  absl::Status ParseEscapedCodePoint(uint32_t* cp) {
    const size_t escape = pos_ - 2;
    RETURN_IF_ERROR(ParseHex4(cp));
    if (*cp < 0xD800 || *cp >= 0xE000) return absl::OkStatus();
    uint32_t low = 0;
    if (*cp < 0xDC00 && Consume("\\u")) {
      RETURN_IF_ERROR(ParseHex4(&low));
    }
    if (low < 0xDC00 || low >= 0xE000) {
      pos_ = escape;
      return Error(absl::StrFormat(
          "\\u%04x is half of a UTF-16 surrogate pair without its other half, which no "
          "UTF-8 text can hold",
          *cp));
    }
    *cp = 0x10000 + ((*cp - 0xD800) << 10) + (low - 0xDC00);
    return absl::OkStatus();
  }

  absl::Status ParseString(std::string* out) {
    ++pos_;  // opening quote
    while (true) {
      if (pos_ >= text_.size()) return Error("unterminated string");
      const char c = text_[pos_++];
      if (c == '"') return absl::OkStatus();
      if (static_cast<unsigned char>(c) < 0x20) {
        return Error("control character in string");
      }
      if (static_cast<unsigned char>(c) >= 0x80) {
        --pos_;
        const int length = Utf8SequenceLength(text_.substr(pos_));
        if (length == 0) {
          return Error(
              absl::StrFormat("invalid UTF-8 (byte 0x%02X)", static_cast<unsigned char>(c)));
        }
        out->append(text_.data() + pos_, length);
        pos_ += length;
        continue;
      }
      if (c != '\\') {
        out->push_back(c);
        continue;
      }
      if (pos_ >= text_.size()) return Error("unterminated escape");
      const char e = text_[pos_++];
      switch (e) {
        case '"':
          out->push_back('"');
          break;
        case '\\':
          out->push_back('\\');
          break;
        case '/':
          out->push_back('/');
          break;
        case 'b':
          out->push_back('\b');
          break;
        case 'f':
          out->push_back('\f');
          break;
        case 'n':
          out->push_back('\n');
          break;
        case 'r':
          out->push_back('\r');
          break;
        case 't':
          out->push_back('\t');
          break;
        case 'u': {
          uint32_t cp = 0;
          RETURN_IF_ERROR(ParseEscapedCodePoint(&cp));
          AppendCodePoint(cp, out);
          break;
        }
        default:
          return Error("bad escape");
      }
    }
  }

  // Number of ASCII digits at pos_, which it skips.
  size_t SkipDigits() {
    const size_t begin = pos_;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
    return pos_ - begin;
  }

  // JSON's grammar, -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?, which is
  // Python's too: "+1", "1." and ".5" are errors there, so they are here.
  absl::Status ParseNumber(JsonValue* v) {
    const size_t begin = pos_;
    const bool negative = Consume("-");
    if (!Consume("0") && SkipDigits() == 0) {
      if (negative) return Error("malformed number");
      return Error("unexpected character");
    }
    bool integral = true;
    if (Consume(".")) {
      integral = false;
      if (SkipDigits() == 0) return Error("malformed number");
    }
    if (Consume("e") || Consume("E")) {
      integral = false;
      if (!Consume("+")) Consume("-");
      if (SkipDigits() == 0) return Error("malformed number");
    }
    const std::string number(text_.substr(begin, pos_ - begin));
    v->type_ = JsonValue::Type::kNumber;
    v->number_ = std::strtod(number.c_str(), nullptr);
    if (integral) {
      v->is_integer_ = true;
      v->integer_ = std::strtoll(number.c_str(), nullptr, 10);
    }
    return absl::OkStatus();
  }

  absl::string_view text_;
  size_t pos_ = 0;
};

absl::StatusOr<JsonValue> ParseJson(absl::string_view text) {
  return JsonParser(text).ParseDocument();
}

}  // namespace conveyor
