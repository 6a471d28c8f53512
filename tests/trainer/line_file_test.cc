// --metrics-file's writer: whole lines, every write checked, a failure named with the
// file and the errno text, as a failure while running (exit 1).
#include "trainer/reporting/line_file.h"

#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "base/exit_code.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/util/test_dirs.h"

namespace conveyor {
namespace {

using ::testing::HasSubstr;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(LineFileTest, AppendsWholeLinesAfterWhatTheFileHeld) {
  const std::string path = testing_util::FreshDir("line_file") + "/metrics.jsonl";
  std::ofstream(path) << "{\"iteration\": 1}\n";
  absl::StatusOr<std::unique_ptr<LineFile>> file = LineFile::Open("--metrics-file", path);
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_TRUE(WriteLine(**file, "{\"iteration\": 2}", "--metrics-file").ok());
  EXPECT_EQ(ReadAll(path), "{\"iteration\": 1}\n{\"iteration\": 2}\n");  // written, not buffered
  EXPECT_TRUE((*file)->Close().ok());
}

TEST(LineFileTest, AFailedWriteNamesTheFileAndTheErrnoAndIsAFailureWhileRunning) {
  absl::StatusOr<std::unique_ptr<LineFile>> file = LineFile::Open("--metrics-file", "/dev/full");
  ASSERT_TRUE(file.ok()) << file.status();
  const absl::Status failed = WriteLine(**file, "{\"iteration\": 1}", "--metrics-file");
  EXPECT_EQ(failed.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(failed.message(),
              HasSubstr("--metrics-file /dev/full: cannot write: No space left on device; the "
                        "run stops here"));
  EXPECT_EQ(ExitCodeFor(failed), 1);
  // Later lines are dropped and the first failure stays the file's.
  EXPECT_FALSE(WriteLine(**file, "{\"iteration\": 2}", "--metrics-file").ok());
  EXPECT_EQ((*file)->status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(LineFileTest, AFileThatCannotBeOpenedIsNamed) {
  const absl::StatusOr<std::unique_ptr<LineFile>> file =
      LineFile::Open("--metrics-file", testing_util::FreshDir("line_file") + "/no/such.jsonl");
  EXPECT_THAT(file.status().message(), HasSubstr("cannot open for appending: No such file"));
}

TEST(LineFileTest, AnyStreamWorksForTests) {
  std::ostringstream out;
  ASSERT_TRUE(WriteLine(out, "{}", "--metrics-file").ok());
  EXPECT_EQ(out.str(), "{}\n");
}

}  // namespace
}  // namespace conveyor
