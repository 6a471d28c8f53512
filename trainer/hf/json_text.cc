#include "trainer/hf/json_text.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_format.h"

namespace conveyor {

std::string JsonQuote(absl::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buffer[8];
          std::snprintf(buffer, sizeof(buffer), "\\u%04x", static_cast<unsigned>(c));
          out += buffer;
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

std::string JsonFloat(float value) {
  // JSON has no NaN or infinity; null is what Python's json module cannot produce
  // either, so such a value is surely a bug upstream and must not pass as a number.
  if (!std::isfinite(value)) return "null";
  char buffer[32];
  for (int digits = 1; digits <= 9; ++digits) {  // 9 significant digits always suffice
    std::snprintf(buffer, sizeof(buffer), "%.*g", digits, static_cast<double>(value));
    if (std::strtof(buffer, nullptr) == value) break;
  }
  return buffer;
}

std::string PythonFloat(double value) {
  if (std::isfinite(value) && value == std::floor(value) && std::fabs(value) < 1e16) {
    return absl::StrFormat("%.1f", value);
  }
  return JsonFloat(static_cast<float>(value));
}

}  // namespace conveyor
