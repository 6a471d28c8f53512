#include "base/atomic_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace conveyor {
namespace {

std::string TestDir(const std::string& name) {
  const std::string dir = absl::StrCat(::testing::TempDir(), "/", name);
  ::mkdir(dir.c_str(), 0755);
  return dir;
}

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool Exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

TEST(WriteFileAtomicallyTest, ReplacesTheFileAndLeavesNoTemporary) {
  for (const Durability durability : {Durability::kVisible, Durability::kDurable}) {
    const std::string dir = TestDir(absl::StrCat("replace", static_cast<int>(durability)));
    const std::string path = dir + "/latest.txt";
    ASSERT_TRUE(WriteFileAtomically(path, "old", path + ".tmp", durability).ok());
    ASSERT_TRUE(WriteFileAtomically(path, "new contents", path + ".tmp", durability).ok());
    EXPECT_EQ(Read(path), "new contents");
    EXPECT_FALSE(Exists(path + ".tmp"));
  }
}

TEST(WriteFileAtomicallyTest, AFailedRenameLeavesTheOldFileAndNoTemporary) {
  const std::string dir = TestDir("failed_rename");
  const std::string path = dir + "/taken";
  ASSERT_EQ(::mkdir(path.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((path + "/inside").c_str(), 0755), 0);  // a non-empty folder
  const absl::Status status =
      WriteFileAtomically(path, "x", dir + "/taken.tmp", Durability::kDurable);
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(status.message().substr(0, 14), "cannot rename ") << status;
  EXPECT_FALSE(Exists(dir + "/taken.tmp"));
  EXPECT_TRUE(Exists(path + "/inside"));
}

TEST(WriteFileAtomicallyTest, AMissingFolderIsNotFoundNamingTheTemporary) {
  const std::string path = TestDir("missing") + "/no/such/file";
  const absl::Status status = WriteFileAtomically(path, "x", path + ".tmp", Durability::kVisible);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(status.message(),
            absl::StrCat("cannot create ", path, ".tmp: No such file or directory"));
}

TEST(FolderOfTest, TheFolderThatHoldsAPath) {
  EXPECT_EQ(FolderOf("run/metrics.jsonl"), "run");
  EXPECT_EQ(FolderOf("/tmp/a/b"), "/tmp/a");
  EXPECT_EQ(FolderOf("/trace.json"), "/");
  EXPECT_EQ(FolderOf("trace.json"), ".");
}

}  // namespace
}  // namespace conveyor
