// The pool's size from the CPUs a process may use (affinity, cgroup v2 quota of its group
// and its ancestors, under a fake root) and its ranges: each index once, nested calls
// inline.
#include "runtime/cpu/thread_pool.h"

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace conveyor::cpu {
namespace {

namespace fs = std::filesystem;

void Write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

fs::path FreshRoot(const std::string& name) {
  const fs::path root = fs::path(std::getenv("TEST_TMPDIR")) / name;
  fs::remove_all(root);
  Write(root / "proc/self/cgroup", "0::/job/step\n");
  return root;
}

TEST(UsableCpusTest, AffinityWithoutAQuota) {
  const fs::path root = FreshRoot("no_quota");
  Write(root / "sys/fs/cgroup/job/step/cpu.max", "max 100000\n");
  EXPECT_EQ(UsableCpusUnder(root.string(), 8), 8);
}

TEST(UsableCpusTest, QuotaRoundsUpAndTheTightestAncestorBinds) {
  const fs::path root = FreshRoot("quota");
  Write(root / "sys/fs/cgroup/job/step/cpu.max", "250000 100000\n");  // 2.5 CPUs
  EXPECT_EQ(UsableCpusUnder(root.string(), 8), 3);
  Write(root / "sys/fs/cgroup/job/cpu.max", "100000 100000\n");
  EXPECT_EQ(UsableCpusUnder(root.string(), 8), 1);
  EXPECT_EQ(UsableCpusUnder(root.string(), 0), 1);
}

TEST(UsableCpusTest, AffinityBelowTheQuota) {
  const fs::path root = FreshRoot("affinity");
  Write(root / "sys/fs/cgroup/cpu.max", "1600000 100000\n");
  EXPECT_EQ(UsableCpusUnder(root.string(), 2), 2);
}

TEST(ParallelForTest, EveryIndexOnceInContiguousRanges) {
  for (int threads : {1, 3}) {
    SetPoolThreads(threads);
    EXPECT_EQ(PoolThreads(), threads);
    for (int64_t n : {1, 5, 64, 1001}) {
      for (int64_t grain : {1, 7, 2000}) {
        std::vector<std::atomic<int>> hits(n);
        std::atomic<int> calls{0};
        ParallelFor(n, grain, [&](int64_t begin, int64_t end) {
          ++calls;
          EXPECT_LT(begin, end);
          for (int64_t i = begin; i < end; ++i) ++hits[i];
        });
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i], 1) << n << " " << grain << " " << i;
        // Less than two grains of work is one range, run by the caller.
        if (n < 2 * grain || threads == 1) {
          EXPECT_EQ(calls, 1);
        }
      }
    }
  }
}

TEST(ParallelForEachTest, EveryIndexOnce) {
  for (int threads : {1, 3}) {
    SetPoolThreads(threads);
    for (int64_t n : {0, 1, 5, 64, 1001}) {
      std::vector<std::atomic<int>> hits(n);
      ParallelForEach(n, [&](int64_t i) { ++hits[i]; });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i], 1) << n << " " << i;
    }
  }
}

// Each index is a task of its own: while one thread is held in task 0, the other takes
// every later task. (ParallelFor's ranges would put tasks 1 and 2 behind task 0 in the
// same range, and this would wait for them in vain.)
TEST(ParallelForEachTest, ATaskThatWaitsDoesNotHoldBackTheNext) {
  SetPoolThreads(2);
  constexpr int64_t kTasks = 20;
  std::atomic<int64_t> others_done{0};
  std::atomic<bool> waited_in_vain{false};
  ParallelForEach(kTasks, [&](int64_t i) {
    if (i != 0) {
      ++others_done;
      return;
    }
    // A generous bound: only a task stuck behind this one fails it.
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (others_done.load() < kTasks - 1) {
      if (std::chrono::steady_clock::now() > give_up) {
        waited_in_vain = true;
        return;
      }
      std::this_thread::yield();
    }
  });
  EXPECT_FALSE(waited_in_vain);
  EXPECT_EQ(others_done, kTasks - 1);
}

TEST(ParallelForTest, NestedCallsRunInline) {
  SetPoolThreads(2);
  std::atomic<int64_t> total{0};
  ParallelFor(4, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      ParallelFor(10, 1, [&](int64_t b, int64_t e) { total += e - b; });
    }
  });
  EXPECT_EQ(total, 40);
}

// Ranks are forked from a process whose pool already has worker threads (a test that
// ran ops before launching ranks, or a launcher that did). The child has only the
// forking thread: its copy of the pool's condition variable still counts the parent's
// sleeping workers as waiters, and waking them would wait for them forever. The child
// must get a pool of its own, with the same number of threads, and finish its work.
TEST(ParallelForTest, AForkedChildRunsOnAPoolOfItsOwn) {
  SetPoolThreads(3);
  // Fork right after a job, many times: at that moment the parent's workers may be
  // anywhere between their last chunk and their next wait (holding the pool's lock).
  for (int fork_round = 0; fork_round < 200; ++fork_round) {
    std::atomic<int64_t> warm{0};
    ParallelFor(1000, 1, [&](int64_t b, int64_t e) { warm += e - b; });
    ASSERT_EQ(warm, 1000);
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      std::atomic<int64_t> total{0};
      for (int round = 0; round < 10; ++round) {
        ParallelFor(1000, 1, [&](int64_t b, int64_t e) { total += e - b; });
      }
      _exit(total == 10 * 1000 && PoolThreads() == 3 ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);  // a hang ends at the test's timeout
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "fork " << fork_round << ": status " << status;
  }
}

}  // namespace
}  // namespace conveyor::cpu
