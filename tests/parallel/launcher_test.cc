// The launcher's promises: every rank runs with its environment; one failure stops
// the job within seconds with one line naming the rank; nothing outlives it.
#include "parallel/launcher.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/parallel/multi_rank.h"
#include "tests/util/test_dirs.h"

namespace conveyor {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using testing_util::Fail;
using testing_util::FreshDir;
using testing_util::ProcessGone;
using testing_util::ReadFile;
using testing_util::WaitForFile;
using testing_util::WriteFile;

std::string PidFile(const std::string& dir, int rank) { return absl::StrCat(dir, "/pid.", rank); }

void RecordPid(const std::string& dir, const RankEnvironment& env) {
  WriteFile(PidFile(dir, env.rank), absl::StrCat(::getpid()));
}

std::vector<pid_t> ReadPids(const std::string& dir, int nproc) {
  std::vector<pid_t> pids;
  for (int r = 0; r < nproc; ++r) {
    int pid = 0;
    if (absl::SimpleAtoi(ReadFile(PidFile(dir, r)), &pid)) pids.push_back(pid);
  }
  return pids;
}

int CountLines(const std::string& text) {
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

TEST(LauncherTest, EveryRankRunsWithItsEnvironment) {
  const std::string dir = FreshDir("launch_ok");
  std::ostringstream err;
  const int code = LaunchLocalRanks(
      3,
      [&](const RankEnvironment& env) {
        if (env.world_size != 3 || env.local_rank != env.rank) return Fail(env, "bad env");
        if (std::string(std::getenv("RANK")) != absl::StrCat(env.rank) ||
            std::string(std::getenv("WORLD_SIZE")) != "3" ||
            std::string(std::getenv("CONVEYOR_RUN_DIR")) != env.run_dir) {
          return Fail(env, "environment variables differ from the RankEnvironment");
        }
        if (::access(env.run_dir.c_str(), W_OK) != 0) return Fail(env, "no run dir");
        WriteFile(absl::StrCat(dir, "/run_dir.", env.rank), env.run_dir);
        return 0;
      },
      err);
  EXPECT_EQ(code, 0) << err.str();
  EXPECT_EQ(err.str(), "");
  const std::string run_dir = ReadFile(dir + "/run_dir.0");
  EXPECT_EQ(ReadFile(dir + "/run_dir.2"), run_dir);
  EXPECT_NE(::access(run_dir.c_str(), F_OK), 0) << "run dir not removed: " << run_dir;
}

TEST(LauncherTest, FailingRankStopsTheJobAndIsNamedOnce) {
  const std::string dir = FreshDir("launch_fail");
  std::ostringstream err;
  const absl::Time start = absl::Now();
  const int code = LaunchLocalRanks(
      3,
      [&](const RankEnvironment& env) {
        RecordPid(dir, env);
        if (env.rank == 1) {
          // Fail only after everyone is running, so the others must be stopped.
          WaitForFile(PidFile(dir, 0), absl::Seconds(5));
          WaitForFile(PidFile(dir, 2), absl::Seconds(5));
          return 3;
        }
        std::this_thread::sleep_for(std::chrono::seconds(30));  // a rank stuck elsewhere
        return 0;
      },
      err);
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(code, 3);
  EXPECT_LT(took, absl::Seconds(15)) << "waited for the stuck rank (30 s)";
  EXPECT_THAT(err.str(), HasSubstr("rank 1 (pid "));
  EXPECT_THAT(err.str(), HasSubstr("exited with code 3"));
  EXPECT_EQ(CountLines(err.str()), 1) << err.str();
  const std::vector<pid_t> pids = ReadPids(dir, 3);
  ASSERT_EQ(pids.size(), 3u);
  for (pid_t pid : pids) EXPECT_TRUE(ProcessGone(pid)) << "pid " << pid << " survived";
}

TEST(LauncherTest, RankIgnoringSigtermIsKilledAfterTheGrace) {
  const std::string dir = FreshDir("launch_grace");
  std::ostringstream err;
  LaunchOptions options;
  options.kill_grace = absl::Milliseconds(300);
  const absl::Time start = absl::Now();
  const int code = LaunchLocalRanks(
      2,
      [&](const RankEnvironment& env) {
        if (env.rank == 0) {
          ::signal(SIGTERM, SIG_IGN);
          RecordPid(dir, env);
          std::this_thread::sleep_for(std::chrono::seconds(30));
          return 0;
        }
        WaitForFile(PidFile(dir, 0), absl::Seconds(5));  // SIGTERM is ignored by now
        RecordPid(dir, env);
        ::raise(SIGKILL);
        return 0;
      },
      err, options);
  EXPECT_EQ(code, 128 + SIGKILL);
  EXPECT_LT(absl::Now() - start, absl::Seconds(15)) << "waited for the stuck rank (30 s)";
  EXPECT_THAT(err.str(), HasSubstr("rank 1 (pid "));
  EXPECT_THAT(err.str(), HasSubstr("was killed by signal 9"));
  EXPECT_EQ(CountLines(err.str()), 1) << err.str();
  for (pid_t pid : ReadPids(dir, 2)) EXPECT_TRUE(ProcessGone(pid));
}

// SIGKILL is what the kernel's OOM killer and a cgroup's memory limit send: the line
// says so, and where to look; other signals are only named.
TEST(LauncherTest, ARankKilledBySigkillMayHaveRunOutOfMemory) {
  for (const int signo : {SIGKILL, SIGUSR1}) {
    std::ostringstream err;
    const int code = LaunchLocalRanks(
        2,
        [signo](const RankEnvironment& env) {
          if (env.rank == 1) ::raise(signo);
          return 0;
        },
        err);
    EXPECT_EQ(code, 128 + signo);
    EXPECT_EQ(CountLines(err.str()), 1) << err.str();
    EXPECT_THAT(err.str(), HasSubstr("rank 1 (pid "));
    EXPECT_THAT(err.str(), HasSubstr(absl::StrCat("was killed by signal ", signo)));
    const auto memory = AllOf(HasSubstr("perhaps for lack of memory (the kernel's OOM killer, "
                                        "or the job's cgroup memory limit)"),
                              HasSubstr("`dmesg`"), HasSubstr("the job's memory limit"));
    if (signo == SIGKILL) {
      EXPECT_THAT(err.str(), memory);
    } else {
      EXPECT_THAT(err.str(), Not(HasSubstr("memory")));
    }
  }
}

// Runs a launcher in a child process (so the test can signal or kill it) whose ranks
// record their pids and sleep. Returns the launcher's pid.
pid_t StartSleepingJob(const std::string& dir, int nproc) {
  const pid_t launcher = ::fork();
  if (launcher == 0) {
    std::ostringstream err;
    LaunchOptions options;
    options.run_dir_parent = dir;  // a SIGKILLed launcher cannot remove its run dir
    const int code = LaunchLocalRanks(
        nproc,
        [&](const RankEnvironment& env) {
          RecordPid(dir, env);
          std::this_thread::sleep_for(std::chrono::seconds(30));
          return 0;
        },
        err, options);
    WriteFile(dir + "/launcher.err", err.str());
    ::_exit(code);
  }
  return launcher;
}

TEST(LauncherTest, ForwardsSigtermToTheRanks) {
  const std::string dir = FreshDir("launch_sigterm");
  const pid_t launcher = StartSleepingJob(dir, 2);
  ASSERT_TRUE(WaitForFile(PidFile(dir, 0), absl::Seconds(5)));
  ASSERT_TRUE(WaitForFile(PidFile(dir, 1), absl::Seconds(5)));
  ::kill(launcher, SIGTERM);
  int status = 0;
  ASSERT_EQ(::waitpid(launcher, &status, 0), launcher);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM);
  EXPECT_THAT(ReadFile(dir + "/launcher.err"), HasSubstr("received Terminated"));
  for (pid_t pid : ReadPids(dir, 2)) EXPECT_TRUE(ProcessGone(pid));
}

TEST(LauncherTest, RanksDieWithAKilledLauncher) {
  const std::string dir = FreshDir("launch_orphans");
  const pid_t launcher = StartSleepingJob(dir, 2);
  ASSERT_TRUE(WaitForFile(PidFile(dir, 0), absl::Seconds(5)));
  ASSERT_TRUE(WaitForFile(PidFile(dir, 1), absl::Seconds(5)));
  ::kill(launcher, SIGKILL);  // no chance to clean up: PR_SET_PDEATHSIG must act
  int status = 0;
  ASSERT_EQ(::waitpid(launcher, &status, 0), launcher);
  const std::vector<pid_t> pids = ReadPids(dir, 2);
  ASSERT_EQ(pids.size(), 2u);
  const absl::Time deadline = absl::Now() + absl::Seconds(2);
  for (pid_t pid : pids) {
    while (!ProcessGone(pid) && absl::Now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_TRUE(ProcessGone(pid)) << "orphan pid " << pid;
  }
}

TEST(LauncherTest, RejectsNoRanks) {
  std::ostringstream err;
  EXPECT_NE(LaunchLocalRanks(
                0, [](const RankEnvironment&) { return 0; }, err),
            0);
  EXPECT_THAT(err.str(), HasSubstr("at least 1"));
}

}  // namespace
}  // namespace conveyor
