// Writing JSON text: the few pieces the Hugging Face files need (data/python_json.h
// only reads JSON).
#ifndef CONVEYOR_TRAINER_HF_JSON_TEXT_H_
#define CONVEYOR_TRAINER_HF_JSON_TEXT_H_

#include <string>

#include "absl/strings/string_view.h"

namespace conveyor {

// `s` as a JSON string literal, quotes included. Bytes >= 0x80 pass through, so
// UTF-8 input stays UTF-8.
std::string JsonQuote(absl::string_view s);

// The shortest decimal text that reads back as exactly `value` ("1e-05", not
// "9.99999975e-06"), so that config files show the numbers people typed.
std::string JsonFloat(float value);

// A float as Python's json module writes one: "10000.0", "1e-05".
std::string PythonFloat(double value);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_HF_JSON_TEXT_H_
