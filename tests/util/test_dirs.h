// Scratch folders for tests, under the test's temporary directory.
#ifndef CONVEYOR_TESTS_UTIL_TEST_DIRS_H_
#define CONVEYOR_TESTS_UTIL_TEST_DIRS_H_

#include <string>

namespace conveyor {
namespace testing_util {

// TEST_TMPDIR, which Bazel empties before each test, or /tmp outside Bazel.
std::string TestTmpDir();

// A new, empty folder under TestTmpDir() whose name starts with `name`: unique per
// call, across processes too (forked ranks may call it).
std::string FreshDir(const std::string& name);

}  // namespace testing_util
}  // namespace conveyor

#endif  // CONVEYOR_TESTS_UTIL_TEST_DIRS_H_
