// A run directory (CONVEYOR_RUN_DIR) outlives its runs: a second run there must meet in
// a place of its own whatever the first left (a finished run's keys, a killed run's
// keys and requests, files of the earlier layout), whichever rank starts first; and no
// wait of the rendezvous may outlast its timeout, whoever is missing.
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "gloo/transport/tcp/address.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "parallel/directory_store.h"
#include "parallel/gloo_communicator.h"
#include "parallel/launcher.h"
#include "parallel/parallel_state.h"
#include "tests/parallel/multi_rank.h"

namespace conveyor {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using testing_util::Fail;
using testing_util::MakeTestDir;
using testing_util::ReadFile;
using testing_util::WriteFile;

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

void MakeDir(const std::string& dir) { std::filesystem::create_directories(dir); }

// What earlier runs leave: a killed launch's join request and answer for rank 1, and a
// world group's keys at the top of the directory (where runs met before launches had
// directories of their own), all pointing nowhere.
void LeaveStaleFiles(const std::string& run_dir) {
  MakeDir(run_dir + "/launch");
  WriteFile(run_dir + "/launch/join_1", "123-00000000deadbeef");
  WriteFile(run_dir + "/launch/ack_1_456-0000000000c0ffee", "launch-older");
  MakeDir(run_dir + "/launch-old/world[0,1]");
  WriteFile(run_dir + "/launch-old/world[0,1]/arrived_0", "");
  MakeDir(run_dir + "/world[0,1]");
  WriteFile(run_dir + "/world[0,1]/0", "stale address");
  WriteFile(run_dir + "/world[0,1]/rank_0", "stale host");
}

absl::StatusOr<std::string> JoinAs(const std::string& run_dir, int rank, int size,
                                   absl::Duration delay) {
  absl::SleepFor(delay);
  absl::StatusOr<std::unique_ptr<DirectoryRendezvous>> joined =
      DirectoryRendezvous::Join(run_dir, rank, size, absl::Seconds(20));
  if (!joined.ok()) return joined.status();
  return (*joined)->dir();
}

TEST(DirectoryRendezvousTest, EveryLaunchGetsAFreshDirectoryWhoeverStartsFirst) {
  const std::string run_dir = MakeTestDir("reuse_join");
  LeaveStaleFiles(run_dir);
  std::string previous;
  // Rank 0 first, then ranks 1 and 2 first (they find the stale request and answers).
  for (absl::Duration rank0_delay : {absl::ZeroDuration(), absl::Milliseconds(200)}) {
    std::vector<std::future<absl::StatusOr<std::string>>> ranks;
    for (int r = 0; r < 3; ++r) {
      ranks.push_back(std::async(std::launch::async, JoinAs, run_dir, r, 3,
                                 r == 0 ? rank0_delay : absl::ZeroDuration()));
    }
    std::vector<std::string> dirs;
    for (auto& rank : ranks) {
      absl::StatusOr<std::string> dir = rank.get();
      ASSERT_TRUE(dir.ok()) << dir.status();
      dirs.push_back(*dir);
    }
    EXPECT_EQ(dirs[1], dirs[0]);
    EXPECT_EQ(dirs[2], dirs[0]);
    EXPECT_THAT(dirs[0], HasSubstr(run_dir + "/launch-"));
    EXPECT_NE(dirs[0], previous) << "two launches share a directory";
    previous = dirs[0];
    // Nothing of an earlier launch there: only the ranks' confirmations.
    EXPECT_THAT(ListDir(dirs[0]), ElementsAre(".joined"));
    EXPECT_THAT(ListDir(dirs[0] + "/.joined"), ElementsAre("1", "2"));
    // Spent requests and answers are gone; a stale request of rank 1's is answered
    // once and that answer removed with the rest.
    EXPECT_THAT(ListDir(run_dir + "/launch"), ElementsAre("ack_1_456-0000000000c0ffee"));
    EXPECT_TRUE(DirectoryRendezvous(dirs[0]).RemoveAll().ok());
    EXPECT_FALSE(std::filesystem::exists(dirs[0]));
  }
}

TEST(DirectoryRendezvousTest, RankZeroNamesTheRanksThatNeverJoin) {
  const std::string run_dir = MakeTestDir("reuse_rank0_alone");
  LeaveStaleFiles(run_dir);  // rank 1's stale request must not count as joining
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<DirectoryRendezvous>> joined =
      DirectoryRendezvous::Join(run_dir, 0, 3, absl::Milliseconds(300));
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(joined.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(joined.status().message(),
              AllOf(HasSubstr("rank(s) 1, 2 of 3 never joined"), HasSubstr(run_dir),
                    HasSubstr("within 300ms"), HasSubstr("same run directory")));
  EXPECT_GE(took, absl::Milliseconds(300));
  EXPECT_LT(took, absl::Seconds(2));
}

TEST(DirectoryRendezvousTest, ARankNamesRankZeroWhenNoLaunchAnswers) {
  const std::string run_dir = MakeTestDir("reuse_rank1_alone");
  LeaveStaleFiles(run_dir);  // the stale answers to rank 1 are not for this process
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<DirectoryRendezvous>> joined =
      DirectoryRendezvous::Join(run_dir, 1, 2, absl::Milliseconds(300));
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(joined.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(joined.status().message(),
              AllOf(HasSubstr("rank 0 never admitted rank 1 of 2"), HasSubstr(run_dir),
                    HasSubstr("start rank 0 with the same run directory")));
  EXPECT_GE(took, absl::Milliseconds(300));
  EXPECT_LT(took, absl::Seconds(2));
}

// The hang behind a reused run directory: a peer's address was in the store (stale, or
// a peer that died after publishing it) but nobody ever connected from it. gloo (Debian
// git 2022-05-18) waits five times its context's timeout for a pair to connect; the
// communicator must end within its own timeout, naming the rank that never connected.
TEST(GlooRendezvousTest, APeerThatArrivedButNeverConnectsEndsWithinTheTimeout) {
  const std::string run_dir = MakeTestDir("reuse_dead_peer");
  GroupSpec world{"world[0,1]", {0, 1}, 0};
  {
    absl::StatusOr<std::unique_ptr<RendezvousStore>> store =
        DirectoryRendezvous(run_dir).OpenStore(world.name, absl::Seconds(1));
    ASSERT_TRUE(store.ok()) << store.status();
    // Group rank 1 arrived, published its host and an address where nothing listens;
    // port 65535 is above any port this rank's pair listens on, which makes this rank
    // the side that waits to be connected.
    sockaddr_storage storage = {};
    auto* in = reinterpret_cast<sockaddr_in*>(&storage);
    in->sin_family = AF_INET;
    in->sin_port = htons(65535);
    in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    (*store)->set("arrived_1", {});
    const std::string host = "nowhere";
    (*store)->set("rank_1", std::vector<char>(host.begin(), host.end()));
    (*store)->set("1", gloo::transport::tcp::Address(storage, 0).bytes());
  }
  absl::StatusOr<std::shared_ptr<gloo::transport::Device>> device = CreateGlooDevice("127.0.0.1");
  ASSERT_TRUE(device.ok()) << device.status();
  const absl::Duration timeout = absl::Seconds(2);
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<GlooCommunicator>> comm =
      GlooCommunicator::Create(world, DirectoryRendezvous(run_dir), *device, timeout);
  const absl::Duration took = absl::Now() - start;
  ASSERT_FALSE(comm.ok());
  EXPECT_THAT(comm.status().message(),
              AllOf(HasSubstr("rendezvous of group world[0,1]"), HasSubstr("while connecting"),
                    HasSubstr("not connected: group rank 1 (global rank 1)")));
  EXPECT_LT(took, timeout + absl::Seconds(1)) << "gloo's 5 x timeout again: " << comm.status();
}

// ParallelState end to end: runs in one run directory, one after another, the second
// after a run that never finished; a run that finishes leaves nothing behind.
int TrainLikeRun(const RankEnvironment& launched, const std::string& run_dir, bool finish,
                 const std::string& result_file) {
  RankEnvironment env = launched;  // as RANK/WORLD_SIZE/CONVEYOR_RUN_DIR set it
  env.run_dir = run_dir;
  auto state = ParallelState::Create(env, 1, 1, absl::Seconds(20));
  if (!state.ok()) return Fail(env, state.status().ToString());
  double value = env.rank + 1;
  if (absl::Status s = (*state)->world().AllReduceSum(&value, 1); !s.ok()) {
    return Fail(env, s.ToString());
  }
  if (env.rank == 0) WriteFile(result_file, absl::StrCat(value));
  if (!finish) return 0;  // as if killed: no final barrier, the files stay
  if (absl::Status s = (*state)->Finish(); !s.ok()) return Fail(env, s.ToString());
  return 0;
}

TEST(ParallelStateReuseTest, RunsOneAfterAnotherInTheSameRunDirectory) {
  const std::string dir = MakeTestDir("reuse_state");
  const std::string run_dir = dir + "/run";
  LeaveStaleFiles(run_dir);
  std::filesystem::remove_all(run_dir + "/launch-old");
  for (int run = 0; run < 3; ++run) {
    const bool finish = run != 1;  // the second run ends without Finish
    const std::string result = absl::StrCat(dir, "/sum.", run);
    std::ostringstream err;
    const int code = LaunchLocalRanks(
        3, [&](const RankEnvironment& env) { return TrainLikeRun(env, run_dir, finish, result); },
        err);
    ASSERT_EQ(code, 0) << "run " << run << ": " << err.str();
    EXPECT_EQ(ReadFile(result), "6") << "run " << run;
    std::vector<std::string> launches;
    for (const std::string& name : ListDir(run_dir)) {
      if (absl::StartsWith(name, "launch-")) launches.push_back(name);
    }
    // Only the unfinished run's directory stays.
    EXPECT_EQ(launches.size(), run == 0 ? 0u : 1u) << "run " << run;
  }
}

TEST(ParallelStateReuseTest, ARankWhosePeerNeverComesEndsWithinTheTimeout) {
  const std::string run_dir = MakeTestDir("reuse_missing_peer");
  std::ostringstream err;
  const int code = LaunchLocalRanks(
      2,
      [&](const RankEnvironment& launched) {
        RankEnvironment env = launched;
        env.run_dir = run_dir;
        if (env.rank == 1) return 0;  // never starts
        const absl::Time start = absl::Now();
        auto state = ParallelState::Create(env, 1, 1, absl::Milliseconds(500));
        const absl::Duration took = absl::Now() - start;
        if (state.ok()) return Fail(env, "created the groups without rank 1");
        const std::string message(state.status().message());
        if (state.status().code() != absl::StatusCode::kDeadlineExceeded ||
            message.find("rank 0: meeting the other ranks in CONVEYOR_RUN_DIR=" + run_dir) ==
                std::string::npos ||
            message.find("rank(s) 1 of 2 never joined") == std::string::npos ||
            took > absl::Seconds(2)) {
          return Fail(env, absl::StrCat("unexpected after ", absl::FormatDuration(took), ": ",
                                        state.status().ToString()));
        }
        return 0;
      },
      err);
  EXPECT_EQ(code, 0) << err.str();
}

TEST(ParallelStateReuseTest, APeerThatJoinsButNeverArrivesIsNamedWithinTheTimeout) {
  const std::string run_dir = MakeTestDir("reuse_peer_dies");
  std::ostringstream err;
  const int code = LaunchLocalRanks(
      2,
      [&](const RankEnvironment& launched) {
        RankEnvironment env = launched;
        env.run_dir = run_dir;
        if (env.rank == 1) {
          // Joins the launch, then dies before the world group's rendezvous.
          auto joined = DirectoryRendezvous::Join(run_dir, 1, 2, absl::Seconds(20));
          return joined.ok() ? 0 : Fail(env, joined.status().ToString());
        }
        const absl::Time start = absl::Now();
        auto state = ParallelState::Create(env, 1, 1, absl::Milliseconds(500));
        const absl::Duration took = absl::Now() - start;
        if (state.ok()) return Fail(env, "created the groups without rank 1");
        const std::string message(state.status().message());
        if (state.status().code() != absl::StatusCode::kDeadlineExceeded ||
            message.find("rank 0: creating the world group") == std::string::npos ||
            message.find("ranks that never arrived: group rank 1 (global rank 1)") ==
                std::string::npos ||
            took > absl::Seconds(2)) {
          return Fail(env, absl::StrCat("unexpected after ", absl::FormatDuration(took), ": ",
                                        state.status().ToString()));
        }
        return 0;
      },
      err);
  EXPECT_EQ(code, 0) << err.str();
}

}  // namespace
}  // namespace conveyor
