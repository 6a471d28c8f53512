// JSON text read as Python's json.loads reads it (the reader of every file
// Megatron and Hugging Face take), over nlohmann-json. Where the two differ,
// Python's rule wins: NaN, Infinity and -Infinity are numbers, and so is a
// literal past the double range (1e400 is inf); a leading byte-order mark is
// refused, where nlohmann-json skips it. A key given twice takes its last
// value, and in an ordered_json keeps its first position, as a dict does.
// Errors name the problem and its byte offset in Conveyor's words.
#ifndef CONVEYOR_DATA_PYTHON_JSON_H_
#define CONVEYOR_DATA_PYTHON_JSON_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace conveyor {

// Objects keep their members in the order the text gives them: error
// messages list fields as the file has them.
using Json = nlohmann::ordered_json;

// Parses one JSON document. Json's ordered objects look members up one by one,
// which is fine for config files and JSON lines; a file with a large object (a
// vocabulary of 50k tokens) is parsed as nlohmann::json instead. Refused as by
// Python: text that is not well-formed UTF-8, a \u escape of half a surrogate
// pair (no UTF-8 text holds one), and trailing non-space text.
template <typename JsonType = Json>
absl::StatusOr<JsonType> ParseJson(absl::string_view text);

// Member `key` of `object`, or nullptr when absent or `object` is not an object.
const Json* FindMember(const Json& object, absl::string_view key);

// Member `key` of `object`, or a null value when absent: convenient for
// chained reads of optional fields (nlohmann's const operator[] requires the key).
const Json& MemberOrNull(const Json& object, absl::string_view key);

// Reads of a value whose type the caller has checked, or shows in a message
// however wrong it is: a number as int64 (a fraction truncated) or as double,
// true or false, a string; anything else reads as 0, false or "" (nlohmann's
// get<> throws instead).
int64_t AsInt64(const Json& value);
double AsDouble(const Json& value);
bool AsBool(const Json& value);
const std::string& AsString(const Json& value);

// The byte-order mark some editors write at the start of UTF-8 files.
inline constexpr absl::string_view kUtf8Bom = "\xEF\xBB\xBF";

}  // namespace conveyor

#endif  // CONVEYOR_DATA_PYTHON_JSON_H_
