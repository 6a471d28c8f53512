// The host memory limit read from a stand-in /proc and cgroup tree, and the
// message CheckHostMemory gives.
#include "runtime/host_memory.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/util/test_dirs.h"

namespace conveyor {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

class HostMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = testing_util::FreshDir(::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  void Write(const std::string& path, const std::string& text) {
    std::filesystem::create_directories(std::filesystem::path(root_ + path).parent_path());
    std::ofstream(root_ + path) << text;
  }
  std::string root_;
};

TEST_F(HostMemoryTest, PhysicalMemoryWithoutCgroups) {
  const HostMemoryLimit limit = HostMemoryLimitUnder(root_, 64 * kGiB);
  EXPECT_EQ(limit.bytes, 64 * kGiB);
  EXPECT_EQ(limit.source, "physical memory");
}

TEST_F(HostMemoryTest, CgroupV2TightestAncestor) {
  Write("/proc/self/mountinfo",
        "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n");
  Write("/proc/self/cgroup", "0::/jobs/run7\n");
  Write("/sys/fs/cgroup/jobs/run7/memory.max", "max\n");
  Write("/sys/fs/cgroup/jobs/memory.max", "17179869184\n");  // 16 GiB
  const HostMemoryLimit limit = HostMemoryLimitUnder(root_, 64 * kGiB);
  EXPECT_EQ(limit.bytes, 16 * kGiB);
  EXPECT_EQ(limit.source, "the cgroup limit /sys/fs/cgroup/jobs/memory.max");
}

TEST_F(HostMemoryTest, CgroupV1InsideAContainer) {
  // The group's host path lies outside the mounted part: the mount's top is
  // the container's group. Its "unlimited" value is above physical memory.
  Write("/proc/self/mountinfo",
        "35 31 0:32 /docker/abc /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
        "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n");
  Write("/proc/self/cgroup", "4:memory:/other/xyz\n0::/\n");
  Write("/sys/fs/cgroup/memory/memory.limit_in_bytes", "8589934592\n");  // 8 GiB
  Write("/sys/fs/cgroup/unified/memory.max", "max\n");
  HostMemoryLimit limit = HostMemoryLimitUnder(root_, 64 * kGiB);
  EXPECT_EQ(limit.bytes, 8 * kGiB);
  EXPECT_EQ(limit.source, "the cgroup limit /sys/fs/cgroup/memory/memory.limit_in_bytes");
  Write("/sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
  limit = HostMemoryLimitUnder(root_, 64 * kGiB);
  EXPECT_EQ(limit.bytes, 64 * kGiB);
  EXPECT_EQ(limit.source, "physical memory");
}

TEST_F(HostMemoryTest, ThisMachineHasSomeMemory) { EXPECT_GT(HostMemoryAvailable().bytes, 0); }

// The resident memory a process holds before its first tensor, read from
// /proc/self/status (what trainer/planning/host_memory_fit.h counts for every rank).
TEST(ProcessMemoryTest, ReadsThePeakAndTheAnonymousPart) {
  const ProcessMemory m = ProcessMemoryFromStatus(
      "Name:\ttrainer\nVmPeak:\t 1843368 kB\nVmHWM:\t  276848 kB\nVmRSS:\t  215004 kB\n"
      "RssAnon:\t  111748 kB\nRssFile:\t  103256 kB\n");
  EXPECT_EQ(m.peak_bytes, int64_t{276848} * 1024);
  EXPECT_EQ(m.anonymous_bytes, int64_t{111748} * 1024);
  EXPECT_EQ(ProcessMemoryFromStatus("").peak_bytes, 0);

  const ProcessMemory self = ThisProcessMemory();
  EXPECT_GT(self.anonymous_bytes, 0);
  EXPECT_GE(self.peak_bytes, self.anonymous_bytes);
}

TEST(CheckHostMemoryTest, NamesBothSizesAndTheSource) {
  const HostMemoryLimit limit{15 * kGiB + kGiB / 2, "physical memory"};
  EXPECT_TRUE(CheckHostMemory(15 * kGiB, "the indices", limit).ok());
  const absl::Status st = CheckHostMemory(372 * kGiB + kGiB / 2, "the indices", limit);
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(st.message(),
            "the indices need 372.5 GiB of host memory, but this process may use 15.5 GiB "
            "(physical memory)");
  EXPECT_EQ(FormatMemorySize(int64_t{3} << 29), "1.5 GiB");
  EXPECT_EQ(FormatMemorySize(int64_t{3} << 19), "1.5 MiB");
}

}  // namespace
}  // namespace conveyor
