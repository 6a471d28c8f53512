// A small JSON reader: enough for JSON-lines corpora (preprocessing) and the
// fixture files the tests compare against. No JSON library ships with the
// system image, and a full one would be far more than either use needs.
#ifndef CONVEYOR_DATA_JSON_LITE_H_
#define CONVEYOR_DATA_JSON_LITE_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace conveyor {

class JsonValue {
 public:
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };

  JsonValue() = default;

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::kNull; }
  bool is_number() const { return type_ == Type::kNumber; }
  bool is_string() const { return type_ == Type::kString; }
  bool is_array() const { return type_ == Type::kArray; }
  bool is_object() const { return type_ == Type::kObject; }

  bool boolean() const { return bool_; }
  double number() const { return number_; }
  // Integers are kept exactly (a double would round ids above 2^53).
  int64_t integer() const { return is_integer_ ? integer_ : int64_t(number_); }
  const std::string& str() const { return string_; }
  const std::vector<JsonValue>& array() const { return array_; }
  const std::vector<std::pair<std::string, JsonValue>>& object() const { return object_; }

  // Member `key` of an object, or nullptr when absent or not an object.
  const JsonValue* Find(absl::string_view key) const;
  // Member `key`, or a null value when absent: convenient for chained reads.
  const JsonValue& operator[](absl::string_view key) const;
  const JsonValue& operator[](size_t i) const { return array_[i]; }
  size_t size() const { return type_ == Type::kArray ? array_.size() : object_.size(); }

  // The elements of a number array as int64.
  std::vector<int64_t> IntArray() const;

 private:
  friend class JsonParser;
  Type type_ = Type::kNull;
  bool bool_ = false;
  bool is_integer_ = false;
  int64_t integer_ = 0;
  double number_ = 0;
  std::string string_;
  std::vector<JsonValue> array_;
  std::vector<std::pair<std::string, JsonValue>> object_;
};

// Parses one JSON document as Python's json.loads does (the reader of every
// file Megatron takes): a key given twice keeps its first position and its
// last value; NaN, Infinity and -Infinity are numbers. Refused as there: a
// leading byte-order mark, text that is not well-formed UTF-8, a \u escape of
// half a surrogate pair (no UTF-8 text holds one), and trailing non-space
// text. Errors give the byte offset of the problem.
absl::StatusOr<JsonValue> ParseJson(absl::string_view text);

// The byte-order mark some editors write at the start of UTF-8 files.
inline constexpr absl::string_view kUtf8Bom = "\xEF\xBB\xBF";


}  // namespace conveyor

#endif  // CONVEYOR_DATA_JSON_LITE_H_
