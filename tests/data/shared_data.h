// Locating the repository's test fixtures (tests/testdata: files written by
// Megatron-LM, the GPT-2 vocabulary) from inside a Bazel test sandbox.
#ifndef CONVEYOR_TESTS_DATA_SHARED_DATA_H_
#define CONVEYOR_TESTS_DATA_SHARED_DATA_H_

#include <string>

#include "data/gpt_indices.h"
#include "data/python_json.h"

namespace conveyor::testing_util {

// Path of tests/testdata in the test's runfiles. The test aborts with a clear
// message when it is missing.
std::string TestDataDir();

// Whole file contents; aborts with the path on failure.
std::string ReadFileOrDie(const std::string& path);
Json ReadJsonOrDie(const std::string& path);

// Expects `indices` to equal the document, sample and shuffle indices of a
// Megatron fixture (gpt_tiny_uint16_seq16_seed1234_n40.json's layout).
void ExpectIndicesMatchFixture(const GptIndices& indices, const Json& fixture);

}  // namespace conveyor::testing_util

#endif  // CONVEYOR_TESTS_DATA_SHARED_DATA_H_
