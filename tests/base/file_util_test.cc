#include "base/file_util.h"

#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace conveyor {
namespace {

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(WriteAllTest, WritesEveryByteAtTheOffset) {
  const std::string path = absl::StrCat(::testing::TempDir(), "/write_all");
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  const std::string big(3 << 20, 'x');  // several pipe- and page-sized pieces
  EXPECT_TRUE(WriteAll(fd, "head:", path).ok());
  EXPECT_TRUE(WriteAll(fd, big, path).ok());
  EXPECT_TRUE(WriteAll(fd, "", path).ok());
  ASSERT_EQ(::close(fd), 0);
  EXPECT_EQ(Read(path), "head:" + big);
}

TEST(WriteAllTest, AFullDiskIsAFailureWhileRunningNamingThePath) {
  const int fd = ::open("/dev/full", O_WRONLY | O_CLOEXEC);
  if (fd < 0) GTEST_SKIP() << "no /dev/full";
  const absl::Status status = WriteAll(fd, "data", "metrics.txt");
  ::close(fd);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  EXPECT_TRUE(absl::StartsWith(status.message(), "cannot write metrics.txt: ")) << status;
}

TEST(PathExistsTest, FilesAndFoldersExistMissingNamesDoNot) {
  const std::string path = absl::StrCat(::testing::TempDir(), "/exists");
  std::ofstream(path) << "x";
  EXPECT_TRUE(PathExists(path));
  EXPECT_TRUE(PathExists(::testing::TempDir()));
  EXPECT_FALSE(PathExists(path + ".missing"));
  EXPECT_FALSE(PathExists(path + "/under_a_file"));
}

}  // namespace
}  // namespace conveyor
