// DirectoryStore's writes in a folder all ranks share: no two writers ever share a
// temporary file (ranks on different nodes may have the same pid and make the same
// calls), and a write that fails never puts a truncated value in place.
#include "parallel/directory_store.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/parallel/multi_rank.h"
#include "tests/util/test_dirs.h"

namespace conveyor {
namespace {

using ::testing::IsEmpty;
using ::testing::StartsWith;
using testing_util::FreshDir;
using testing_util::ReadFile;
using testing_util::WriteFile;

// Runs `body` in `n` forked children at once; true when every child exited 0. gtest
// assertions do not cross fork(): a child reports on stderr and by its exit code.
bool InChildren(int n, const std::function<int(int child)>& body) {
  std::vector<pid_t> children;
  std::fflush(nullptr);  // nothing buffered is written twice
  for (int c = 0; c < n; ++c) {
    const pid_t pid = ::fork();
    if (pid == 0) ::_exit(body(c));
    children.push_back(pid);
  }
  bool all_ok = true;
  for (pid_t pid : children) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    all_ok = all_ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  return all_ok;
}

std::vector<std::string> Temporaries(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (absl::StartsWith(name, ".tmp")) names.push_back(name);
  }
  return names;
}

// Ranks in containers on different nodes may start with the same pid and make the same
// calls. Forked children start with the same state; their pids, which differ, are taken
// out of the names, as if they were the same: the names must still differ.
std::string AsIfPidWereShared(const std::string& name) {
  return absl::StrReplaceAll(name, {{absl::StrCat(::getpid()), "<pid>"}});
}

TEST(TemporaryFileNameTest, DiffersAcrossProcessesWithTheSamePidAndCalls) {
  const std::string dir = FreshDir("tmp_names");
  const std::string first = TemporaryFileName();  // whatever state a generator keeps
  EXPECT_THAT(first, StartsWith(".tmp."));
  constexpr int kChildren = 3, kNames = 500;
  ASSERT_TRUE(InChildren(kChildren, [&](int child) {
    std::string names;
    for (int i = 0; i < kNames; ++i) {
      absl::StrAppend(&names, AsIfPidWereShared(TemporaryFileName()), "\n");
    }
    WriteFile(absl::StrCat(dir, "/names.", child), names);
    return 0;
  }));
  std::set<std::string> all = {AsIfPidWereShared(first)};
  for (int child = 0; child < kChildren; ++child) {
    for (absl::string_view name :
         absl::StrSplit(ReadFile(absl::StrCat(dir, "/names.", child)), '\n', absl::SkipEmpty())) {
      EXPECT_TRUE(all.insert(std::string(name)).second) << "repeated: " << name;
    }
  }
  EXPECT_EQ(all.size(), 1u + kChildren * kNames);
}

// Writers setting the same keys at once, in the same order: every set() succeeds, every
// value read is whole, and no temporary file stays.
TEST(DirectoryStoreTest, ConcurrentWritersOfTheSameKeysNeverCollide) {
  const std::string dir = FreshDir("store_writers");
  constexpr int kWriters = 4, kRounds = 100, kKeys = 5, kBytes = 4096;
  auto value_of = [&](int writer, int round) {
    std::string value = absl::StrCat(writer, "-", round, ":");
    value.resize(kBytes, static_cast<char>('a' + writer));
    return value;
  };
  ASSERT_TRUE(InChildren(kWriters, [&](int writer) {
    absl::StatusOr<std::unique_ptr<DirectoryStore>> store =
        DirectoryStore::Open(dir, std::chrono::seconds(5));
    if (!store.ok()) return 1;
    try {
      for (int round = 0; round < kRounds; ++round) {
        const std::string value = value_of(writer, round);
        (*store)->set(absl::StrCat("key", round % kKeys), {value.begin(), value.end()});
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "writer %d: %s\n", writer, e.what());
      return 1;
    }
    return 0;
  }));
  for (int k = 0; k < kKeys; ++k) {
    const std::string value = ReadFile(absl::StrCat(dir, "/key", k));
    ASSERT_EQ(value.size(), static_cast<size_t>(kBytes)) << "key" << k;
    const std::string head = value.substr(0, value.find(':'));
    const std::vector<std::string> parts = absl::StrSplit(head, '-');
    ASSERT_EQ(parts.size(), 2u) << head;
    EXPECT_EQ(value, value_of(std::stoi(parts[0]), std::stoi(parts[1]))) << "key" << k;
  }
  EXPECT_THAT(Temporaries(dir), IsEmpty());
}

// A file system that refuses part of a value (disk full, quota; here a file size limit)
// fails set() with the key and leaves neither the key nor a temporary file. Writes that
// buffer (an ofstream checked before it is closed) miss this and put a truncated value
// in place.
TEST(DirectoryStoreTest, AFailedWriteLeavesNoTruncatedValue) {
  const std::string dir = FreshDir("store_full");
  ASSERT_TRUE(InChildren(1, [&](int) {
    absl::StatusOr<std::unique_ptr<DirectoryStore>> store =
        DirectoryStore::Open(dir, std::chrono::seconds(5));
    if (!store.ok()) return 1;
    ::signal(SIGXFSZ, SIG_IGN);  // write() then fails with EFBIG instead of a signal
    const rlimit limit = {100, 100};
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) return 2;
    try {
      (*store)->set("small", {'o', 'k'});  // within the limit: stored
    } catch (const std::exception& e) {
      std::fprintf(stderr, "small value: %s\n", e.what());
      return 3;
    }
    try {
      // Over the limit, yet small enough for a stream to buffer whole until it closes
      // (libstdc++ writes 1 KiB or more at once).
      (*store)->set("big", std::vector<char>(500, 'x'));
      std::fprintf(stderr, "set() of a value over the file size limit succeeded\n");
      return 4;
    } catch (const std::exception& e) {
      if (!absl::StrContains(e.what(), "cannot set key \"big\"")) {
        std::fprintf(stderr, "unexpected error: %s\n", e.what());
        return 5;
      }
    }
    return 0;
  }));
  EXPECT_EQ(ReadFile(dir + "/small"), "ok");
  EXPECT_FALSE(std::filesystem::exists(dir + "/big")) << ReadFile(dir + "/big").size() << " bytes";
  EXPECT_THAT(Temporaries(dir), IsEmpty());
}

}  // namespace
}  // namespace conveyor
