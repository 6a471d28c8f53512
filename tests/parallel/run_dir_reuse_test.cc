// A run directory (CONVEYOR_RUN_DIR) outlives its runs: a second run there must meet in
// a place of its own whatever the first left (a finished run's keys, a killed run's
// keys and requests, files of the earlier layout), whichever rank starts first; and no
// wait of the rendezvous may outlast its timeout, whoever is missing.
#include <linux/capability.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
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
#include "tests/util/test_dirs.h"

namespace conveyor {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing_util::Fail;
using testing_util::FreshDir;
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

// What earlier runs leave: a killed launch's join requests (also of a rank beyond this
// world), an answer, a temporary file of a writer killed mid-write, and a world group's
// keys at the top of the directory (where runs met before launches had directories of
// their own), all pointing nowhere.
void LeaveStaleFiles(const std::string& run_dir) {
  MakeDir(run_dir + "/launch");
  WriteFile(run_dir + "/launch/join_1", "123-00000000deadbeef");
  WriteFile(run_dir + "/launch/join_7", "124-00000000deadbeef");
  WriteFile(run_dir + "/launch/ack_1_456-0000000000c0ffee", "launch-older");
  WriteFile(run_dir + "/launch/.tmp.123.0", "123-00000000");
  MakeDir(run_dir + "/launch-old/world[0,1]");
  WriteFile(run_dir + "/launch-old/world[0,1]/arrived_0", "");
  MakeDir(run_dir + "/world[0,1]");
  WriteFile(run_dir + "/world[0,1]/0", "stale address");
  WriteFile(run_dir + "/world[0,1]/rank_0", "stale host");
}

absl::StatusOr<std::string> JoinAs(const std::string& run_dir, int rank, int size,
                                   absl::Duration delay, absl::Duration timeout) {
  absl::SleepFor(delay);
  absl::StatusOr<std::unique_ptr<DirectoryRendezvous>> joined =
      DirectoryRendezvous::Join(run_dir, rank, size, "", timeout);
  if (!joined.ok()) return joined.status();
  return (*joined)->dir();
}

// Every rank's launch directory, in rank order; stops at the first rank that could not
// join (failing the test), so that a short result means a failure.
std::vector<std::string> LaunchDirs(std::vector<std::future<absl::StatusOr<std::string>>>& ranks) {
  std::vector<std::string> dirs;
  for (auto& rank : ranks) {
    absl::StatusOr<std::string> dir = rank.get();
    EXPECT_TRUE(dir.ok()) << dir.status();
    if (!dir.ok()) break;
    dirs.push_back(*dir);
  }
  return dirs;
}

TEST(DirectoryRendezvousTest, EveryLaunchGetsAFreshDirectoryWhoeverStartsFirst) {
  const std::string run_dir = FreshDir("reuse_join");
  LeaveStaleFiles(run_dir);
  std::string previous;
  // Rank 0 first, then ranks 1 and 2 first (they find the stale request and answers).
  for (absl::Duration rank0_delay : {absl::ZeroDuration(), absl::Milliseconds(200)}) {
    std::vector<std::future<absl::StatusOr<std::string>>> ranks;
    for (int r = 0; r < 3; ++r) {
      ranks.push_back(std::async(std::launch::async, JoinAs, run_dir, r, 3,
                                 r == 0 ? rank0_delay : absl::ZeroDuration(), absl::Seconds(20)));
    }
    const std::vector<std::string> dirs = LaunchDirs(ranks);
    ASSERT_EQ(dirs.size(), ranks.size());
    EXPECT_EQ(dirs[1], dirs[0]);
    EXPECT_EQ(dirs[2], dirs[0]);
    EXPECT_THAT(dirs[0], HasSubstr(run_dir + "/launch-"));
    EXPECT_NE(dirs[0], previous) << "two launches share a directory";
    previous = dirs[0];
    // Nothing of an earlier launch there: only the ranks' confirmations.
    EXPECT_THAT(ListDir(dirs[0]), ElementsAre(".joined"));
    EXPECT_THAT(ListDir(dirs[0] + "/.joined"), ElementsAre("1", "2"));
    // Once all have joined, the handshake folder is cleared: spent requests and
    // answers, and whatever killed launches left there.
    EXPECT_THAT(ListDir(run_dir + "/launch"), IsEmpty());
    EXPECT_TRUE(RemoveRendezvousDirectory(dirs[0]).ok());
    EXPECT_FALSE(std::filesystem::exists(dirs[0]));
  }
}

TEST(DirectoryRendezvousTest, RankZeroNamesTheRanksThatNeverJoin) {
  const std::string run_dir = FreshDir("reuse_rank0_alone");
  LeaveStaleFiles(run_dir);  // rank 1's stale request must not count as joining
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<DirectoryRendezvous>> joined =
      DirectoryRendezvous::Join(run_dir, 0, 3, "", absl::Milliseconds(300));
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(joined.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(joined.status().message(),
              AllOf(HasSubstr("rank(s) 1, 2 of 3 never joined"), HasSubstr(run_dir),
                    HasSubstr("within 300ms"), HasSubstr("same run directory")));
  EXPECT_GE(took, absl::Milliseconds(300));
  EXPECT_LT(took, absl::Seconds(15)) << "not a wait that ends with the timeout";
}

TEST(DirectoryRendezvousTest, ARankNamesRankZeroWhenNoLaunchAnswers) {
  const std::string run_dir = FreshDir("reuse_rank1_alone");
  LeaveStaleFiles(run_dir);  // the stale answers to rank 1 are not for this process
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<DirectoryRendezvous>> joined =
      DirectoryRendezvous::Join(run_dir, 1, 2, "", absl::Milliseconds(300));
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(joined.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(joined.status().message(),
              AllOf(HasSubstr("rank 0 never admitted rank 1 of 2"), HasSubstr(run_dir),
                    HasSubstr("start rank 0 with the same run directory")));
  EXPECT_GE(took, absl::Milliseconds(300));
  EXPECT_LT(took, absl::Seconds(15)) << "not a wait that ends with the timeout";
}

// Two processes claiming rank 1 (two launches in one run directory, or a rank started
// twice): one is admitted, the other fails at once naming the cause; never both.
TEST(DirectoryRendezvousTest, ASecondClaimOfARankFailsAtOnce) {
  const std::string run_dir = FreshDir("reuse_claimed_twice");
  // The first claimant's request is replaced by the second's before rank 0 starts.
  auto first = std::async(std::launch::async, JoinAs, run_dir, 1, 2, absl::ZeroDuration(),
                          absl::Seconds(20));
  auto second = std::async(std::launch::async, JoinAs, run_dir, 1, 2, absl::Milliseconds(100),
                           absl::Seconds(20));
  auto rank0 = std::async(std::launch::async, JoinAs, run_dir, 0, 2, absl::Milliseconds(300),
                          absl::Seconds(20));
  const absl::Time start = absl::Now();
  const absl::StatusOr<std::string> loser = first.get();
  EXPECT_LT(absl::Now() - start, absl::Seconds(10)) << "waited for the 20 s timeout";
  EXPECT_EQ(loser.status().code(), absl::StatusCode::kAlreadyExists) << loser.status();
  EXPECT_THAT(loser.status().message(),
              AllOf(HasSubstr("another process claimed rank 1"), HasSubstr("was replaced"),
                    HasSubstr("one launch at a time per run directory")));
  const absl::StatusOr<std::string> winner = second.get();
  const absl::StatusOr<std::string> leader = rank0.get();
  ASSERT_TRUE(winner.ok()) << winner.status();
  ASSERT_TRUE(leader.ok()) << leader.status();
  EXPECT_EQ(*winner, *leader);
}

TEST(DirectoryRendezvousTest, ClaimsOfOneRankAtOnceAdmitExactlyOne) {
  const std::string run_dir = FreshDir("reuse_claims_race");
  for (int round = 0; round < 3; ++round) {
    std::vector<std::future<absl::StatusOr<std::string>>> claims;
    for (int c = 0; c < 2; ++c) {
      claims.push_back(std::async(std::launch::async, JoinAs, run_dir, 1, 2, absl::ZeroDuration(),
                                  absl::Seconds(2)));
    }
    const absl::StatusOr<std::string> leader =
        JoinAs(run_dir, 0, 2, absl::ZeroDuration(), absl::Seconds(20));
    ASSERT_TRUE(leader.ok()) << leader.status();
    int admitted = 0;
    for (auto& claim : claims) {
      const absl::StatusOr<std::string> joined = claim.get();
      if (joined.ok()) {
        ++admitted;
        EXPECT_EQ(*joined, *leader);
      } else {
        EXPECT_THAT(joined.status().message(),
                    AllOf(HasSubstr("rank 1"), HasSubstr("one launch at a time")))
            << joined.status();
      }
    }
    EXPECT_EQ(admitted, 1) << "round " << round;
  }
}

// Two jobs whose launcher names them (SLURM_JOB_ID, TORCHELASTIC_RUN_ID, CONVEYOR_JOB_ID)
// share a run directory, both rank 1s asking before either rank 0 starts: each job meets
// in a launch of its own. (With one handshake folder for both, the second rank 1's
// request replaced the first's, which failed as a second claim of its rank, or a rank 0
// answered the other job's rank 1.)
TEST(DirectoryRendezvousTest, TwoJobsSharingARunDirectoryMeetApart) {
  const std::string run_dir = FreshDir("reuse_two_jobs");
  const std::string jobs[] = {"CONVEYOR_JOB_ID=a", "SLURM_JOB_ID=7"};
  auto join = [&run_dir](int rank, const std::string& job) {
    return std::async(std::launch::async, [&run_dir, rank, job]() -> absl::StatusOr<std::string> {
      if (rank == 0) absl::SleepFor(absl::Milliseconds(100));
      auto joined = DirectoryRendezvous::Join(run_dir, rank, 2, job, absl::Seconds(20));
      if (!joined.ok()) return joined.status();
      return (*joined)->dir();
    });
  };
  std::vector<std::future<absl::StatusOr<std::string>>> ranks;
  for (const std::string& job : jobs) {
    for (int r = 0; r < 2; ++r) ranks.push_back(join(r, job));
  }
  const std::vector<std::string> dirs = LaunchDirs(ranks);
  ASSERT_EQ(dirs.size(), ranks.size());
  EXPECT_EQ(dirs[1], dirs[0]);
  EXPECT_EQ(dirs[3], dirs[2]);
  EXPECT_NE(dirs[2], dirs[0]) << "the two jobs met";
  EXPECT_THAT(ListDir(run_dir + "/launch.CONVEYOR_JOB_ID%3Da"), IsEmpty());
  EXPECT_THAT(ListDir(run_dir + "/launch.SLURM_JOB_ID%3D7"), IsEmpty());
}

// Ranks started with different world sizes: whichever side has the other one, both the
// rank and rank 0 fail at once naming both sizes (rank 0 of 3 even before its rank 2).
TEST(DirectoryRendezvousTest, RanksOfAnotherWorldSizeAreNamedAtOnceOnBothSides) {
  const std::string run_dir = FreshDir("reuse_world_sizes");
  for (const auto& [rank0_size, rank1_size] : {std::pair(2, 3), std::pair(3, 2)}) {
    const std::string said = absl::StrFormat(
        "global rank 1 has WORLD_SIZE=%d, global rank 0 has WORLD_SIZE=%d", rank1_size, rank0_size);
    const absl::Time start = absl::Now();
    auto rank1 = std::async(std::launch::async, JoinAs, run_dir, 1, rank1_size,
                            absl::ZeroDuration(), absl::Seconds(20));
    const absl::StatusOr<std::string> rank0 =
        JoinAs(run_dir, 0, rank0_size, absl::ZeroDuration(), absl::Seconds(20));
    const absl::StatusOr<std::string> joined = rank1.get();
    EXPECT_LT(absl::Now() - start, absl::Seconds(10)) << "waited for the 20 s timeout: " << said;
    for (const absl::Status& status : {rank0.status(), joined.status()}) {
      EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
      EXPECT_THAT(status.message(),
                  AllOf(HasSubstr("meeting at run directory " + run_dir), HasSubstr(said),
                        HasSubstr("same world size (WORLD_SIZE, or SLURM_NTASKS")));
    }
  }
}

// A claimant that comes when the launch has all its ranks waits for an answer that never
// comes: its error says why that may be.
TEST(DirectoryRendezvousTest, AClaimAfterTheLaunchFilledUpNamesTheLikelyCause) {
  const std::string run_dir = FreshDir("reuse_late_claim");
  auto rank0 = std::async(std::launch::async, JoinAs, run_dir, 0, 2, absl::ZeroDuration(),
                          absl::Seconds(20));
  ASSERT_TRUE(JoinAs(run_dir, 1, 2, absl::ZeroDuration(), absl::Seconds(20)).ok());
  ASSERT_TRUE(rank0.get().ok());
  const absl::StatusOr<std::string> late =
      JoinAs(run_dir, 1, 2, absl::ZeroDuration(), absl::Milliseconds(300));
  EXPECT_EQ(late.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(late.status().message(), AllOf(HasSubstr("rank 0 never admitted rank 1 of 2"),
                                             HasSubstr("another process may have claimed rank 1"),
                                             HasSubstr("one launch at a time per run directory")));
}

// The hang behind a reused run directory: a peer's address was in the store (stale, or
// a peer that died after publishing it) but nobody ever connected from it. gloo (Debian
// git 2022-05-18) waits five times its context's timeout for a pair to connect; the
// communicator must end within its own timeout, naming the rank that never connected.
// Returns how long Create took to fail.
absl::Duration CreateWithDeadPeer(const std::string& run_dir, absl::Duration timeout) {
  GroupSpec world{"world[0,1]", {0, 1}, 0};
  {
    absl::StatusOr<std::unique_ptr<RendezvousStore>> store =
        DirectoryRendezvous(run_dir).OpenStore(world.name, absl::Seconds(1));
    EXPECT_TRUE(store.ok()) << store.status();
    if (!store.ok()) return absl::ZeroDuration();
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
  EXPECT_TRUE(device.ok()) << device.status();
  if (!device.ok()) return absl::ZeroDuration();
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<GlooCommunicator>> comm =
      GlooCommunicator::Create(world, DirectoryRendezvous(run_dir), *device, timeout);
  const absl::Duration took = absl::Now() - start;
  EXPECT_FALSE(comm.ok());
  EXPECT_THAT(comm.status().message(),
              AllOf(HasSubstr("rendezvous of group world[0,1]"), HasSubstr("while connecting"),
                    HasSubstr("not connected: group rank 1 (global rank 1)")));
  return took;
}

TEST(GlooRendezvousTest, APeerThatArrivedButNeverConnectsEndsWithinTheTimeout) {
  const absl::Duration timeout = absl::Seconds(2);
  // The bound sits halfway to the failure it tells apart (gloo's 5 x timeout, 10 s), not
  // just over the timeout: a loaded machine's scheduling must not fail the test.
  EXPECT_LT(CreateWithDeadPeer(FreshDir("reuse_dead_peer"), timeout), 3 * timeout)
      << "gloo's 5 x timeout again";
}

// A fifth of a timeout under 5 ms is under a millisecond, and gloo reads a timeout of
// 0 ms as none: the connect wait must still end.
TEST(GlooRendezvousTest, ATinyTimeoutStillEnds) {
  // The failure is a wait without end (the test's own timeout): 10 s tells it apart with
  // room for a loaded machine.
  EXPECT_LT(CreateWithDeadPeer(FreshDir("reuse_tiny_timeout"), absl::Milliseconds(3)),
            absl::Seconds(10));
}

// ParallelState end to end: runs in one run directory, one after another, the second
// after a run that never finished; a run that finishes leaves nothing behind.
int TrainLikeRun(const RankEnvironment& launched, const std::string& run_dir, bool finish,
                 const std::string& result_file) {
  RankEnvironment env = launched;  // as RANK/WORLD_SIZE/CONVEYOR_RUN_DIR set it
  env.run_dir = run_dir;
  auto state = ParallelState::Create(env, *ResolveLayout(1, 1, env.world_size), absl::Seconds(20));
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
  const std::string dir = FreshDir("reuse_state");
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

std::string LaunchDirIn(const std::string& run_dir) {
  for (const std::string& name : ListDir(run_dir)) {
    if (absl::StartsWith(name, "launch-")) return absl::StrCat(run_dir, "/", name);
  }
  return "";
}

// Root ignores permission bits (CAP_DAC_OVERRIDE): without it, the calling thread is
// refused in a read-only folder like anyone else. Clears the effective set only, which
// any process may; one that lacks these capabilities is unaffected.
bool DropPermissionOverride() {
  __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (::syscall(SYS_capget, &header, data) != 0) return false;
  data[0].effective &= ~((1u << CAP_DAC_OVERRIDE) | (1u << CAP_FOWNER));
  return ::syscall(SYS_capset, &header, data) == 0;
}

// Removing the launch's files at the end is cleanup: when it fails (here a read-only
// folder in it; on NFS, a file still open), the run still succeeds, with a warning
// naming the folder.
TEST(ParallelStateReuseTest, FinishSucceedsWhenTheFilesCannotBeRemoved) {
  const std::string dir = FreshDir("reuse_unremovable");
  const std::string run_dir = dir + "/run";
  const std::string warnings_file = dir + "/warnings";
  std::ostringstream err;
  const int code = LaunchLocalRanks(
      2,
      [&](const RankEnvironment& launched) {
        RankEnvironment env = launched;
        env.run_dir = run_dir;
        auto state =
            ParallelState::Create(env, *ResolveLayout(1, 1, env.world_size), absl::Seconds(20));
        if (!state.ok()) return Fail(env, state.status().ToString());
        if (env.rank == 0) {
          const std::string stuck = LaunchDirIn(run_dir) + "/stuck";
          MakeDir(stuck);
          WriteFile(stuck + "/file", "cannot be removed");
          ::chmod(stuck.c_str(), 0555);
          if (!DropPermissionOverride()) return Fail(env, "cannot drop CAP_DAC_OVERRIDE");
        }
        std::ostringstream warnings;
        if (absl::Status s = (*state)->Finish(warnings); !s.ok()) return Fail(env, s.ToString());
        if (env.rank == 0) WriteFile(warnings_file, warnings.str());
        return 0;
      },
      err);
  ASSERT_EQ(code, 0) << err.str();
  const std::string launch = LaunchDirIn(run_dir);
  ASSERT_FALSE(launch.empty()) << "the folder was removed after all: nothing was tested";
  EXPECT_THAT(ReadFile(warnings_file),
              AllOf(HasSubstr("conveyor: warning: rank 0: the run succeeded, but cannot remove "
                              "the rendezvous directory " +
                              launch),
                    HasSubstr("CONVEYOR_RUN_DIR")));
  ::chmod((launch + "/stuck").c_str(), 0755);  // for the test's own cleanup
}

TEST(ParallelStateReuseTest, ARankWhosePeerNeverComesEndsWithinTheTimeout) {
  const std::string run_dir = FreshDir("reuse_missing_peer");
  std::ostringstream err;
  const int code = LaunchLocalRanks(
      2,
      [&](const RankEnvironment& launched) {
        RankEnvironment env = launched;
        env.run_dir = run_dir;
        if (env.rank == 1) return 0;  // never starts
        const absl::Time start = absl::Now();
        auto state = ParallelState::Create(env, *ResolveLayout(1, 1, env.world_size),
                                           absl::Milliseconds(500));
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
  const std::string run_dir = FreshDir("reuse_peer_dies");
  std::ostringstream err;
  const int code = LaunchLocalRanks(
      2,
      [&](const RankEnvironment& launched) {
        RankEnvironment env = launched;
        env.run_dir = run_dir;
        if (env.rank == 1) {
          // Joins the launch, then dies before the world group's rendezvous.
          auto joined = DirectoryRendezvous::Join(run_dir, 1, 2, "", absl::Seconds(20));
          return joined.ok() ? 0 : Fail(env, joined.status().ToString());
        }
        const absl::Time start = absl::Now();
        auto state = ParallelState::Create(env, *ResolveLayout(1, 1, env.world_size),
                                           absl::Milliseconds(500));
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
