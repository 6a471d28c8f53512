// The committed tokenizer fixtures (tests/data/fixtures/tokenizers, written by
// tools/gen_tokenizer_refs.py) and the reference results beside them.
#ifndef CONVEYOR_TESTS_DATA_TOKENIZER_FIXTURES_H_
#define CONVEYOR_TESTS_DATA_TOKENIZER_FIXTURES_H_

#include <string>

#include "data/tokenizers/tokenizer.h"
#include "nlohmann/json.hpp"

namespace conveyor::testing_util {

// Absolute path of tests/data/fixtures/tokenizers/`name` in the runfiles.
std::string TokenizerFixture(const std::string& name);

// The parsed JSON file; aborts with the path when it cannot be read.
nlohmann::json ReadFixtureJson(const std::string& path);

// Expects `tokenizer` to give each case of `expected` ("cases": [{"text",
// <ids_key>, "decoded"}]) exactly its reference ids, and (when `decoded` is
// set) to decode those ids to the reference text, and "half_ids" (which may
// end inside a character) to "half_decoded" where given. Returns the cases
// checked.
int ExpectMatchesReference(const Tokenizer& tokenizer, const nlohmann::json& expected,
                           const std::string& ids_key = "ids", bool decoded = true);

}  // namespace conveyor::testing_util

#endif  // CONVEYOR_TESTS_DATA_TOKENIZER_FIXTURES_H_
