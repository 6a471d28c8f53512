// Each process group of a real multi-process layout holds exactly the ranks that
// Megatron's layout says: an all-reduce of the global rank in a group must give the
// sum of that group's ranks.
#include "parallel/parallel_state.h"

#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "parallel/launcher.h"
#include "parallel/self_communicator.h"
#include "parallel/tcp_store_server.h"
#include "tests/parallel/fake_device_transport.h"
#include "tests/parallel/multi_rank.h"

namespace conveyor {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing_util::Fail;
using testing_util::FakeDeviceTransport;

// All-reduces the global rank within `comm` and compares with the expected group.
// The launched rank's environment as srun with MASTER_ADDR/MASTER_PORT sets it: the ranks
// meet at global rank 0's TCP store on `port` instead of the run directory.
void MeetAtTcpStore(int port, RankEnvironment* env) {
  env->run_dir.clear();
  env->master_addr = "127.0.0.1";
  env->master_port = env->store_port = port;
}

int CheckGroup(const RankEnvironment& env, Communicator* comm, const std::vector<int>& expected,
               const char* what) {
  if (expected.empty()) {
    return comm == nullptr ? 0 : Fail(env, absl::StrCat(what, ": should not be a member"));
  }
  if (comm == nullptr) return Fail(env, absl::StrCat(what, ": missing"));
  if (comm->size() != static_cast<int>(expected.size())) {
    return Fail(env,
                absl::StrFormat("%s: size %d, expected %d", what, comm->size(), expected.size()));
  }
  double value = env.rank;
  const absl::Status s = comm->AllReduceSum(&value, 1);
  if (!s.ok()) return Fail(env, s.ToString());
  const double sum = std::accumulate(expected.begin(), expected.end(), 0.0);
  if (value != sum) {
    return Fail(env, absl::StrFormat("%s (%s): sum of ranks %g, expected %g", what, comm->name(),
                                     value, sum));
  }
  return 0;
}

int CheckLayout(const RankEnvironment& env, int tp, int pp) {
  const ParallelSizes layout = *ResolveLayout(tp, pp, env.world_size);
  auto state = ParallelState::Create(env, layout, absl::Seconds(20));
  if (!state.ok()) return Fail(env, state.status().ToString());
  ParallelState& ps = **state;
  const int world = env.world_size;
  const RankCoords c = CoordsOf(env.rank, layout);
  if (ps.coords().tp != c.tp || ps.coords().dp != c.dp || ps.coords().pp != c.pp ||
      ps.dp_size() != world / (tp * pp)) {
    return Fail(env, "coords or sizes differ from CoordsOf");
  }
  int failures = 0;
  failures += CheckGroup(env, &ps.world(), GroupOf(GroupKind::kWorld, env.rank, layout), "world");
  failures += CheckGroup(env, &ps.tp(), GroupOf(GroupKind::kTensor, env.rank, layout), "tp");
  failures += CheckGroup(env, &ps.dp(), GroupOf(GroupKind::kData, env.rank, layout), "dp");
  failures += CheckGroup(env, &ps.pp(), GroupOf(GroupKind::kPipeline, env.rank, layout), "pp");
  failures +=
      CheckGroup(env, &ps.model_parallel(), GroupOf(GroupKind::kModel, env.rank, layout), "mp");
  failures += CheckGroup(env, ps.embedding(), GroupOf(GroupKind::kEmbedding, env.rank, layout),
                         "embedding");
  if (ps.tp().name() != GroupName("tp", GroupOf(GroupKind::kTensor, env.rank, layout))) {
    return Fail(env, "unexpected tp group name " + ps.tp().name());
  }
  return failures == 0 ? 0 : 1;
}

TEST(ParallelStateTest, GroupsOfFourRanks) {
  // TP 2 x PP 2 (DP 1), then TP 1 x PP 2 x DP 2: every kind of group is real in one.
  for (const auto& [tp, pp] : {std::pair{2, 2}, std::pair{1, 2}}) {
    std::ostringstream err;
    const int code = LaunchLocalRanks(
        4, [&, tp = tp, pp = pp](const RankEnvironment& env) { return CheckLayout(env, tp, pp); },
        err);
    EXPECT_EQ(code, 0) << "TP " << tp << " PP " << pp << ": " << err.str();
  }
}

// The expert groups: built as rank_layout lists them when EP > 1; with EP = 1 the
// expert-parallel group is the rank alone and the expert-data group is data x context.
int CheckExpertGroups(const RankEnvironment& env, int tp, int ep) {
  const ParallelSizes layout = *ResolveLayout(tp, 1, env.world_size, /*cp=*/1, ep);
  auto state = ParallelState::Create(env, layout, absl::Seconds(20));
  if (!state.ok()) return Fail(env, state.status().ToString());
  ParallelState& ps = **state;
  if (ps.ep_size() != ep) return Fail(env, "ep_size differs from the requested EP");
  int failures = CheckGroup(env, &ps.ep(), GroupOf(GroupKind::kExpert, env.rank, layout), "ep");
  failures += CheckGroup(env, &ps.expert_dp(), GroupOf(GroupKind::kExpertData, env.rank, layout),
                         "expert-dp");
  if (ep == 1 && &ps.expert_dp() != &ps.dp_cp()) {
    return Fail(env, "with EP 1 the expert-data group should be data x context itself");
  }
  return failures == 0 ? 0 : 1;
}

TEST(ParallelStateTest, ExpertGroupsOfFourRanks) {
  // EP 2 over DP 4, EP 2 over DP 2 x TP 2, and EP 1.
  for (const auto& [tp, ep] : {std::pair{1, 2}, std::pair{2, 2}, std::pair{1, 1}}) {
    std::ostringstream err;
    const int code = LaunchLocalRanks(
        4,
        [&, tp = tp, ep = ep](const RankEnvironment& env) {
          return CheckExpertGroups(env, tp, ep);
        },
        err);
    EXPECT_EQ(code, 0) << "TP " << tp << " EP " << ep << ": " << err.str();
  }
}

// With a device transport, every group of two or more ranks carries host buffers
// through gloo and device buffers through the transport; one-rank groups need none.
int CheckTransportRouting(const RankEnvironment& env, int tp, int pp) {
  FakeDeviceTransport transport(/*arena_floats=*/16);
  const ParallelSizes layout = *ResolveLayout(tp, pp, env.world_size);
  auto state = ParallelState::Create(env, layout, absl::Seconds(20), &transport);
  if (!state.ok()) return Fail(env, state.status().ToString());
  ParallelState& ps = **state;
  const std::pair<Communicator*, GroupKind> groups[] = {{&ps.world(), GroupKind::kWorld},
                                                        {&ps.tp(), GroupKind::kTensor},
                                                        {&ps.dp(), GroupKind::kData},
                                                        {&ps.pp(), GroupKind::kPipeline},
                                                        {&ps.model_parallel(), GroupKind::kModel},
                                                        {ps.embedding(), GroupKind::kEmbedding},
                                                        {&ps.cp(), GroupKind::kContext}};
  int shared = 0;  // groups with more than one rank
  for (const auto& [comm, kind] : groups) {
    const std::vector<int> members = GroupOf(kind, env.rank, layout);
    if (comm == nullptr) continue;
    if (CheckGroup(env, comm, members, comm->name().c_str()) != 0) return 1;
    float* on_device = transport.arena();
    on_device[0] = static_cast<float>(env.rank);
    const absl::Status s = comm->AllReduceSum(MakeBuffer(on_device, 1, MemoryKind::kDevice));
    if (!s.ok()) return Fail(env, s.ToString());
    if (on_device[0] != std::accumulate(members.begin(), members.end(), 0)) {
      return Fail(env, absl::StrFormat("%s: device sum %g", comm->name(), on_device[0]));
    }
    shared += members.size() > 1 ? 1 : 0;
  }
  if (transport.connections() != shared ||
      transport.device_log() != std::vector<std::string>(shared, "AllReduceSum")) {
    return Fail(env,
                absl::StrFormat("%d groups of several ranks, but %d transport groups and %d "
                                "device operations",
                                shared, transport.connections(), transport.device_log().size()));
  }
  float host[2] = {};
  const absl::Status split =
      ps.tp().AllGather(MakeBuffer(host, 1), MakeBuffer(transport.arena(), 2, MemoryKind::kDevice));
  if (split.code() != absl::StatusCode::kInvalidArgument) {
    return Fail(env,
                "an all-gather from host to device memory was not refused: " + split.ToString());
  }
  return 0;
}

TEST(ParallelStateTest, DeviceBuffersCrossTheTransport) {
  std::ostringstream err;
  const int code = LaunchLocalRanks(
      4, [](const RankEnvironment& env) { return CheckTransportRouting(env, 2, 1); }, err);
  EXPECT_EQ(code, 0) << err.str();
}

TEST(ParallelStateTest, SingleProcessCopiesThroughTheTransport) {
  FakeDeviceTransport transport(/*arena_floats=*/8);
  std::unique_ptr<ParallelState> ps = ParallelState::SingleProcess(&transport);
  float* dev = transport.arena();
  for (int i = 0; i < 4; ++i) dev[i] = i + 1.0f;
  // The distributed optimizer's shard exchange with one data-parallel rank.
  const auto device = [](float* p) { return MakeBuffer(p, 4, MemoryKind::kDevice); };
  EXPECT_TRUE(ps->dp().ReduceScatterSum(device(dev), device(dev + 4)).ok());
  EXPECT_EQ(dev[7], 4.0f);
  EXPECT_TRUE(ps->dp().AllGather(device(dev), device(dev)).ok());  // in place: nothing to copy
  EXPECT_EQ(transport.copies(), 1);
  // Without a transport a one-rank group has no way to device memory.
  SelfCommunicator host_only("dp[0]");
  EXPECT_THAT(host_only.AllReduceSum(device(dev)).message(),
              HasSubstr("declared in device memory, which this group's communicator does not "
                        "move"));
}

// A free port a moment ago: rank 0 listens there.
int FreePort() {
  absl::StatusOr<std::unique_ptr<TcpStoreServer>> probe = TcpStoreServer::Start(0, {});
  EXPECT_TRUE(probe.ok()) << probe.status();
  return probe.ok() ? (*probe)->port() : 0;
}

TEST(ParallelStateTest, RanksWithoutASharedDirectoryMeetAtRankZerosTcpStore) {
  const int port = FreePort();
  std::ostringstream err;
  const int code = LaunchLocalRanks(
      4,
      [port](const RankEnvironment& launched) {
        RankEnvironment env = launched;
        MeetAtTcpStore(port, &env);
        return CheckLayout(env, 2, 2);
      },
      err);
  EXPECT_EQ(code, 0) << err.str();
}

// Rank 1 is started with WORLD_SIZE 3, rank 0 with 2: both fail at the rendezvous, long
// before the timeout, naming both world sizes; in a run directory and at a TCP store.
TEST(ParallelStateTest, RanksThatDisagreeOnTheWorldSizeFailAtOnceNamingBoth) {
  const int port = FreePort();
  for (const bool tcp : {false, true}) {
    std::ostringstream err;
    const int code = LaunchLocalRanks(
        2,
        [tcp, port](const RankEnvironment& launched) {
          RankEnvironment env = launched;
          if (env.rank == 1) env.world_size = 3;
          if (tcp) MeetAtTcpStore(port, &env);
          const absl::Time start = absl::Now();
          auto state =
              ParallelState::Create(env, *ResolveLayout(1, 1, env.world_size), absl::Seconds(30));
          const absl::Duration took = absl::Now() - start;
          if (state.ok()) return Fail(env, "met ranks of another world size");
          const std::string message(state.status().message());
          if (state.status().code() != absl::StatusCode::kFailedPrecondition ||
              message.find("global rank 1 has WORLD_SIZE=3, global rank 0 has WORLD_SIZE=2") ==
                  std::string::npos ||
              took > absl::Seconds(15)) {  // not the 30 s timeout
            return Fail(env, absl::StrCat("unexpected after ", absl::FormatDuration(took), ": ",
                                          state.status().ToString()));
          }
          return 0;
        },
        err);
    EXPECT_EQ(code, 0) << (tcp ? "TCP store: " : "run directory: ") << err.str();
  }
}

// Two processes started with RANK=1 (the launcher gave rank 2's process
// rank 1's number) met at the TCP store and failed later in gloo with "connection
// refused". Now every process fails at the store at once, saying that rank 1 was
// claimed twice and by whom, as a refusal of input (AlreadyExists).
TEST(ParallelStateTest, TwoProcessesWithOneRankFailAtOnceNamingTheRank) {
  const int port = FreePort();
  std::ostringstream err;
  const int code = LaunchLocalRanks(
      3,
      [port](const RankEnvironment& launched) {
        RankEnvironment env = launched;
        if (env.rank == 2) env.rank = 1;
        MeetAtTcpStore(port, &env);
        const absl::Time start = absl::Now();
        auto state =
            ParallelState::Create(env, *ResolveLayout(1, 1, env.world_size), absl::Seconds(30));
        const absl::Duration took = absl::Now() - start;
        if (state.ok()) return Fail(env, "formed a job with rank 1 twice");
        if (state.status().code() != absl::StatusCode::kAlreadyExists ||
            !absl::StrContains(state.status().message(),
                               "global rank 1 was claimed by two processes") ||
            took > absl::Seconds(15)) {  // not the 30 s timeout
          return Fail(env, absl::StrCat("unexpected after ", absl::FormatDuration(took), ": ",
                                        state.status().ToString()));
        }
        return 0;
      },
      err);
  EXPECT_EQ(code, 0) << err.str();
}

// A MASTER_ADDR that does not resolve fails within seconds, not after the
// whole --distributed-timeout-minutes, naming the variable (InvalidArgument: exit 2).
TEST(ParallelStateTest, AnUnresolvableMasterAddrFailsAtOnce) {
  RankEnvironment env;
  env.rank = 1;
  env.world_size = 2;
  env.master_addr = "no-such-host.invalid";
  env.master_port = env.store_port = 29500;
  const absl::Time start = absl::Now();
  auto state = ParallelState::Create(env, *ResolveLayout(1, 1, env.world_size), absl::Minutes(10));
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
  EXPECT_EQ(state.status().code(), absl::StatusCode::kInvalidArgument) << state.status();
  EXPECT_THAT(state.status().message(),
              AllOf(HasSubstr("cannot resolve MASTER_ADDR \"no-such-host.invalid\""),
                    HasSubstr("set MASTER_ADDR to global rank 0's host name")));
}

TEST(ParallelStateTest, SingleProcessUsesSelfCommunicators) {
  RankEnvironment env;  // rank 0 of 1, no run dir needed
  auto state = ParallelState::Create(env, *ResolveLayout(1, 1, env.world_size), absl::Seconds(1));
  ASSERT_TRUE(state.ok()) << state.status();
  ParallelState& ps = **state;
  EXPECT_EQ(ps.world().size(), 1);
  ASSERT_NE(ps.embedding(), nullptr);
  EXPECT_NE(dynamic_cast<SelfCommunicator*>(&ps.tp()), nullptr);
  float x[3] = {1, 2, 3};
  float out[3];
  EXPECT_TRUE(ps.dp().AllReduceSum(x, 3).ok());
  EXPECT_TRUE(ps.tp().AllGather(x, 3, out).ok());
  EXPECT_EQ(out[2], 3.0f);
  EXPECT_TRUE(ps.is_first_stage() && ps.is_last_stage());
}

TEST(ParallelStateTest, RefusesBadLayoutsAndMissingRendezvous) {
  RankEnvironment env;
  env.world_size = 6;
  env.rank = 1;
  env.run_dir = "/nonexistent";
  ParallelSizes tp4;  // TP 4 of 6 ranks
  tp4.tp = 4;
  auto bad = ParallelState::Create(env, tp4, absl::Seconds(1));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("--tensor-model-parallel-size"));
  env.run_dir = "";
  auto no_dir = ParallelState::Create(env, *ResolveLayout(2, 1, 6), absl::Seconds(1));
  EXPECT_THAT(no_dir.status().message(),
              AllOf(HasSubstr("CONVEYOR_RUN_DIR"), HasSubstr("MASTER_ADDR and MASTER_PORT")));
}

TEST(SelfCommunicatorTest, CopiesAndMatchesSelfSends) {
  SelfCommunicator self("tp[3]");
  float a[2] = {1, 2}, b[2] = {0, 0};
  EXPECT_TRUE(self.BatchSendRecv({{false, 0, b, 2}, {true, 0, a, 2}}).ok());
  EXPECT_EQ(b[1], 2.0f);
  EXPECT_TRUE(self.ReduceScatterSum(a, 2, b).ok());
  EXPECT_FALSE(self.Broadcast(a, 2, 1).ok());
  EXPECT_THAT(self.BatchSendRecv({{true, 1, a, 2}}).message(), HasSubstr("tp[3]"));
}

}  // namespace
}  // namespace conveyor
