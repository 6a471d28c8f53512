#include "parallel/parallel_state.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "parallel/directory_store.h"
#include "parallel/gloo_communicator.h"
#include "parallel/group.h"
#include "parallel/routed_communicator.h"
#include "parallel/self_communicator.h"
#include "parallel/tcp_rendezvous.h"

namespace conveyor {
namespace {

// Whether `host` resolves to a loopback address only (Debian maps a host's own name to
// 127.0.1.1 in /etc/hosts).
bool ResolvesToLoopbackOnly(const std::string& host) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0) return false;
  bool loopback_only = true;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    if (a->ai_family == AF_INET) {
      const auto* v4 = reinterpret_cast<const sockaddr_in*>(a->ai_addr);
      loopback_only &= (ntohl(v4->sin_addr.s_addr) >> 24) == 127;
    } else if (a->ai_family == AF_INET6) {
      loopback_only &=
          IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(a->ai_addr)->sin6_addr);
    }
  }
  ::freeaddrinfo(found);
  return loopback_only;
}

// The address peers use to reach this rank. Loopback when the job is on one host
// (built-in launcher, or a master on this host); otherwise this host's name, which
// gloo resolves to the interface it binds (GLOO_SOCKET_IFNAME names one instead). A name
// that resolves to loopback only is said once: ranks on other nodes could not connect,
// and their collectives would time out.
std::string GlooHostname(const RankEnvironment& env) {
  const std::string& master = env.master_addr;
  if (master.empty() || master == "localhost" || master == "127.0.0.1" || master == "::1") {
    return "127.0.0.1";
  }
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "127.0.0.1";
  if (env.gloo_interface.empty() && ResolvesToLoopbackOnly(name)) {
    std::cerr << "conveyor: warning: rank " << env.rank << ": this host's name " << name
              << " resolves to a loopback address, which ranks on other nodes cannot reach; if "
              << "the job spans nodes, set " << kGlooInterfaceEnv
              << " to the interface they share (e.g. eth0, ib0)\n";
  }
  return name;
}

// This launch's own subdirectory of the shared directory (so that what an earlier launch
// left there is never read), whose files global rank 0 removes in Finish.
absl::StatusOr<std::unique_ptr<DirectoryRendezvous>> JoinRunDir(const RankEnvironment& env,
                                                                absl::Duration timeout) {
  ASSIGN_OR_RETURN(
      std::unique_ptr<DirectoryRendezvous> joined,
      DirectoryRendezvous::Join(env.run_dir, env.rank, env.world_size, env.job_id, timeout),
      _ << "rank " << env.rank << ": meeting the other ranks in " << kRunDirEnv << "="
        << env.run_dir);
  return joined;
}

// The TCP store at MASTER_ADDR, which global rank 0 serves (into `server`) for the life
// of the state; rank 0 returns once every rank of its job has connected.
absl::StatusOr<std::unique_ptr<RendezvousPoint>> ConnectToStore(
    const RankEnvironment& env, absl::Duration timeout, std::unique_ptr<TcpStoreServer>* server) {
  if (env.master_addr.empty() || env.store_port == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", env.rank, " of ", env.world_size,
                     ": the ranks need a place to rendezvous: set ", kRunDirEnv,
                     " to a directory shared by all ranks, or MASTER_ADDR and MASTER_PORT to "
                     "global rank 0's host and a free port"));
  }
  const tcp_store::Membership self = {env.rank, env.world_size, env.job_id};
  if (env.rank == 0) {
    absl::StatusOr<std::unique_ptr<TcpStoreServer>> started =
        TcpStoreServer::Start(env.store_port, self);
    if (!started.ok()) {
      return absl::Status(started.status().code(),
                          absl::StrCat(started.status().message(),
                                       "; under torchrun, whose own store holds "
                                       "MASTER_PORT, set ",
                                       kStorePortEnv, " to another free port"));
    }
    *server = *std::move(started);
  }
  ASSIGN_OR_RETURN(std::shared_ptr<TcpStoreClient> client,
                   TcpStoreClient::Connect(env.master_addr, env.store_port, self, timeout));
  if (env.rank == 0) {
    RETURN_IF_ERROR((*server)->AwaitRanks(timeout));
  }
  return std::unique_ptr<RendezvousPoint>(std::make_unique<TcpRendezvous>(std::move(client)));
}

// `layout` is valid, holds env.world_size ranks, and env.rank is one of them.
absl::Status CheckLayout(const RankEnvironment& env, const ParallelSizes& layout) {
  ASSIGN_OR_RETURN(const ParallelSizes resolved, ResolveLayout(layout.tp, layout.pp, env.world_size,
                                                               layout.cp, layout.ep, layout.etp));
  if (resolved.dp != layout.dp) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", env.rank, ": the layout's TP x CP x PP x DP is ", layout.world(),
                     " ranks, but the world size is ", env.world_size));
  }
  if (env.rank < 0 || env.rank >= env.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", env.rank, " is outside world size ", env.world_size));
  }
  return absl::OkStatus();
}

// Where the ranks meet: this launch's subdirectory of the run directory (its path into
// `launch_dir`), or else the TCP store global rank 0 serves (into `server`).
absl::StatusOr<std::unique_ptr<RendezvousPoint>> Meet(const RankEnvironment& env,
                                                      absl::Duration timeout,
                                                      std::unique_ptr<TcpStoreServer>* server,
                                                      std::string* launch_dir) {
  if (env.run_dir.empty()) return ConnectToStore(env, timeout, server);
  ASSIGN_OR_RETURN(std::unique_ptr<DirectoryRendezvous> launch, JoinRunDir(env, timeout));
  *launch_dir = launch->dir();
  return std::unique_ptr<RendezvousPoint>(std::move(launch));
}

// Builds this rank's group of a kind: a SelfCommunicator when it is alone in it, else a
// gloo group (routed with a `transport` communicator for device buffers when given).
struct GroupMaker {
  int rank;
  const ParallelSizes& layout;
  RendezvousPoint& meeting;
  std::shared_ptr<gloo::transport::Device> device;
  const DeviceTransport* transport;
  absl::Duration timeout;

  absl::StatusOr<std::unique_ptr<Communicator>> operator()(GroupKind kind) const {
    GroupSpec spec;
    spec.global_ranks = GroupOf(kind, rank, layout);
    if (spec.global_ranks.empty()) return std::unique_ptr<Communicator>();
    spec.name = GroupName(GroupKindName(kind), spec.global_ranks);
    spec.rank =
        static_cast<int>(std::find(spec.global_ranks.begin(), spec.global_ranks.end(), rank) -
                         spec.global_ranks.begin());
    if (spec.global_ranks.size() == 1) {
      return std::unique_ptr<Communicator>(
          std::make_unique<SelfCommunicator>(spec.name, transport));
    }
    ASSIGN_OR_RETURN(std::unique_ptr<GlooCommunicator> gloo,
                     GlooCommunicator::Create(spec, meeting, device, timeout));
    if (transport == nullptr) return std::unique_ptr<Communicator>(std::move(gloo));
    ASSIGN_OR_RETURN(std::unique_ptr<Communicator> on_device,
                     transport->Connect(spec, meeting, timeout));
    return std::unique_ptr<Communicator>(
        std::make_unique<RoutedCommunicator>(std::move(gloo), std::move(on_device)));
  }
};

}  // namespace

ParallelState::~ParallelState() { CloseGroups(); }

void ParallelState::CloseGroups() {
  // Communicators first: they use the device.
  expert_tp_.reset();
  expert_dp_.reset();
  ep_.reset();
  dp_cp_.reset();
  cp_.reset();
  embedding_.reset();
  model_parallel_.reset();
  pp_.reset();
  dp_.reset();
  tp_.reset();
  world_.reset();
}

std::unique_ptr<ParallelState> ParallelState::SingleProcess(const DeviceTransport* transport) {
  std::unique_ptr<ParallelState> state(new ParallelState());
  state->world_ = std::make_unique<SelfCommunicator>("world[0]", transport);
  state->tp_ = std::make_unique<SelfCommunicator>("tp[0]", transport);
  state->dp_ = std::make_unique<SelfCommunicator>("dp[0]", transport);
  state->pp_ = std::make_unique<SelfCommunicator>("pp[0]", transport);
  state->model_parallel_ = std::make_unique<SelfCommunicator>("mp[0]", transport);
  state->embedding_ = std::make_unique<SelfCommunicator>("embd[0]", transport);
  state->cp_ = std::make_unique<SelfCommunicator>("cp[0]", transport);
  state->ep_ = std::make_unique<SelfCommunicator>("ep[0]", transport);
  return state;
}

std::vector<std::pair<GroupKind, std::unique_ptr<Communicator>*>> ParallelState::GroupsToBuild(
    const DeviceTransport* transport) {
  std::vector<std::pair<GroupKind, std::unique_ptr<Communicator>*>> groups = {
      {GroupKind::kWorld, &world_},
      {GroupKind::kTensor, &tp_},
      {GroupKind::kData, &dp_},
      {GroupKind::kPipeline, &pp_},
      {GroupKind::kModel, &model_parallel_},
      {GroupKind::kEmbedding, &embedding_},
      {GroupKind::kContext, &cp_},
  };
  if (layout_.cp > 1) groups.push_back({GroupKind::kDataContext, &dp_cp_});  // else dp itself
  if (layout_.experts_have_own_groups()) {  // else a group of one, and dp_cp itself
    groups.push_back({GroupKind::kExpert, &ep_});
    groups.push_back({GroupKind::kExpertData, &expert_dp_});
  } else {
    ep_ = std::make_unique<SelfCommunicator>(GroupName(GroupKindName(GroupKind::kExpert), {rank_}),
                                             transport);
  }
  if (layout_.etp != layout_.tp) {
    groups.push_back({GroupKind::kExpertTensor, &expert_tp_});  // else tp
  }
  return groups;
}

absl::StatusOr<std::unique_ptr<ParallelState>> ParallelState::Create(
    const RankEnvironment& env, const ParallelSizes& layout, absl::Duration timeout,
    const DeviceTransport* transport,
    const std::function<absl::Status(Communicator& world)>& check_world) {
  RETURN_IF_ERROR(CheckLayout(env, layout));
  if (env.world_size == 1) {
    std::unique_ptr<ParallelState> single = SingleProcess(transport);
    single->layout_ = layout;
    return single;
  }
  std::unique_ptr<ParallelState> state(new ParallelState());
  ASSIGN_OR_RETURN(const std::unique_ptr<RendezvousPoint> meeting,
                   Meet(env, timeout, &state->store_server_, &state->launch_dir_));
  state->rank_ = env.rank;
  state->layout_ = layout;
  state->coords_ = CoordsOf(env.rank, layout);
  ASSIGN_OR_RETURN(std::shared_ptr<gloo::transport::Device> device,
                   CreateGlooDevice(GlooHostname(env), env.gloo_interface));
  state->device_ = device;
  // Every rank builds its groups in this same order; each rendezvous involves only
  // the group's members, so no two ranks can wait on each other in different groups.
  const GroupMaker make{env.rank, layout, *meeting, device, transport, timeout};
  for (const auto& [kind, slot] : state->GroupsToBuild(transport)) {
    ASSIGN_OR_RETURN(
        *slot, make(kind),
        _ << "rank " << env.rank << ": creating the " << GroupKindName(kind) << " group");
    if (kind == GroupKind::kWorld && check_world != nullptr) {
      RETURN_IF_ERROR(check_world(*state->world_)) << "rank " << env.rank;
    }
  }
  return state;
}

absl::Status ParallelState::Finish() { return Finish(std::cerr); }

absl::Status ParallelState::Finish(std::ostream& warnings) {
  if (world_size() == 1 || world_ == nullptr) return absl::OkStatus();  // nothing (left) to end
  // Past the barrier no rank opens a store or a board again (they are read only while
  // the groups are built), so the files can go.
  RETURN_IF_ERROR(world_->Barrier()) << "rank " << rank_ << ": the barrier at the end of the run";
  // Every rank closes its groups, whose progress boards hold files of the launch
  // directory open: on NFS a file removed while open on the same client stays as
  // .nfsXXXX, and its directory with it.
  CloseGroups();
  if (rank_ != 0 || launch_dir_.empty()) return absl::OkStatus();
  // The run succeeded, and no later launch reads this folder: what cannot be removed
  // only takes space, so it is worth a warning, not a failed run.
  if (absl::Status s = RemoveRendezvousDirectory(launch_dir_); !s.ok()) {
    warnings << "conveyor: warning: rank 0: the run succeeded, but " << s.message()
             << "; no later launch in " << kRunDirEnv << " reads it: remove it when convenient\n";
  }
  return absl::OkStatus();
}

}  // namespace conveyor
