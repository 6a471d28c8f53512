#include "tests/util/test_dirs.h"

#include <stdlib.h>

#include <cstdio>
#include <cstdlib>

namespace conveyor {
namespace testing_util {

std::string TestTmpDir() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return tmp != nullptr ? tmp : "/tmp";
}

std::string FreshDir(const std::string& name) {
  std::string pattern = TestTmpDir() + "/" + name + "-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) {
    std::perror(("mkdtemp " + pattern).c_str());
    std::abort();
  }
  return pattern;
}

}  // namespace testing_util
}  // namespace conveyor
