// The process groups of one rank (Megatron's parallel_state): world, tensor, data,
// pipeline, embedding, model-parallel, context-parallel, data x context, expert-parallel
// and expert-data-parallel communicators, built once at start-up.
#ifndef CONVEYOR_PARALLEL_PARALLEL_STATE_H_
#define CONVEYOR_PARALLEL_PARALLEL_STATE_H_

#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "parallel/communicator.h"
#include "parallel/device_transport.h"
#include "parallel/rank_environment.h"
#include "parallel/rank_layout.h"
#include "parallel/tcp_store_server.h"

namespace conveyor {

class ParallelState {
 public:
  // One process, every group of size 1 (SelfCommunicator). `transport` (may be
  // null: host buffers only; must outlive the state) lets the groups copy device
  // buffers.
  static std::unique_ptr<ParallelState> SingleProcess(const DeviceTransport* transport = nullptr);

  // Every rank calls this with the same layout (ResolveLayout for the world size),
  // timeout and kind of transport.
  // Groups of size 1 are SelfCommunicators; the others are gloo groups that
  // rendezvous in env.run_dir and bound every operation by `timeout`
  // (--distributed-timeout-minutes), paired with a `transport` communicator for device
  // buffers when one is given (RoutedCommunicator). The ranks meet in env.run_dir when
  // set (in a subdirectory of its own, so a run directory can be reused:
  // DirectoryRendezvous::Join), else at the TCP store global rank 0 serves at
  // env.master_addr:store_port, meeting only ranks of job env.job_id. Fails when the
  // layout is invalid or not env.world_size ranks, env names neither, a rank's world
  // size differs from rank 0's (naming both), the TCP store's port holds another program
  // or another job's store, or a rendezvous times out (naming the missing ranks); no wait
  // lasts longer than `timeout`.
  //
  // `check_world`, when given, runs on the world group as soon as it exists, before any
  // other group is built: a collective that lets the ranks refuse to go on together
  // (they compare their configurations), whose error Create returns.
  static absl::StatusOr<std::unique_ptr<ParallelState>> Create(
      const RankEnvironment& env, const ParallelSizes& layout, absl::Duration timeout,
      const DeviceTransport* transport = nullptr,
      const std::function<absl::Status(Communicator& world)>& check_world = nullptr);

  ~ParallelState();

  // Ends a run that succeeded on every rank: all ranks meet at a world barrier and close
  // their groups, then global rank 0 removes this launch's rendezvous files from the run
  // directory (CONVEYOR_RUN_DIR), so the next run there starts clean. Every rank calls it
  // once, after its last collective, and not after a failure (the barrier would wait for
  // the failed ranks until the timeout); afterwards the groups are gone (only the
  // destructor may follow). Fails only when the barrier does: files that cannot be
  // removed (the run succeeded, and they sit in a subdirectory no later launch reads)
  // are reported on `warnings`, naming the folder. A run that never calls it leaves its
  // files in their own subdirectory, where no later launch looks.
  absl::Status Finish(std::ostream& warnings);
  absl::Status Finish();  // warnings on std::cerr

  Communicator& world() { return *world_; }
  Communicator& tp() { return *tp_; }
  Communicator& dp() { return *dp_; }
  Communicator& pp() { return *pp_; }
  Communicator& model_parallel() { return *model_parallel_; }
  // nullptr unless this rank is on the first or last pipeline stage.
  Communicator* embedding() { return embedding_.get(); }
  // The context-parallel ring, and data x context (where gradients are reduced: Megatron's
  // data-parallel group with_context_parallel), which is the data-parallel group itself
  // when CP = 1.
  Communicator& cp() { return *cp_; }
  Communicator& dp_cp() { return dp_cp_ != nullptr ? *dp_cp_ : *dp_; }
  // Expert parallelism (rank_layout.h): the ranks that exchange tokens for each other's
  // experts (a group of one when EP = 1), the ranks holding the same experts, over which
  // their gradients are reduced (data x context itself when EP = 1 and ETP = TP), and
  // the ranks holding an expert's shards (the tensor-parallel group when ETP = TP).
  Communicator& ep() { return *ep_; }
  Communicator& expert_dp() { return expert_dp_ != nullptr ? *expert_dp_ : dp_cp(); }
  Communicator& expert_tp() { return expert_tp_ != nullptr ? *expert_tp_ : tp(); }

  const RankCoords& coords() const { return coords_; }
  int rank() const { return rank_; }
  const ParallelSizes& layout() const { return layout_; }
  int world_size() const { return layout_.world(); }
  int tp_size() const { return layout_.tp; }
  int pp_size() const { return layout_.pp; }
  int cp_size() const { return layout_.cp; }
  int ep_size() const { return layout_.ep; }
  int etp_size() const { return layout_.etp; }
  int dp_size() const { return layout_.dp; }
  bool is_first_stage() const { return coords_.pp == 0; }
  bool is_last_stage() const { return coords_.pp == layout_.pp - 1; }

 private:
  ParallelState() = default;

  void CloseGroups();  // the communicators, before the device they use
  // The groups this rank builds, in the order every rank builds them, and the members
  // they fill; the expert-parallel group of one, when the experts have no groups of their
  // own, is made here.
  std::vector<std::pair<GroupKind, std::unique_ptr<Communicator>*>> GroupsToBuild(
      const DeviceTransport* transport);

  int rank_ = 0;
  ParallelSizes layout_;
  RankCoords coords_;
  // Global rank 0's TCP rendezvous store, when the ranks meet there: it outlives the
  // communicators, whose progress boards post to it.
  std::unique_ptr<TcpStoreServer> store_server_;
  // This launch's subdirectory of env.run_dir; empty when the ranks met at a TCP store.
  std::string launch_dir_;
  std::shared_ptr<void> device_;  // the gloo TCP device the groups share
  std::unique_ptr<Communicator> world_, tp_, dp_, pp_, model_parallel_, embedding_, cp_, dp_cp_,
      ep_, expert_dp_, expert_tp_;
};

}  // namespace conveyor

#endif  // CONVEYOR_PARALLEL_PARALLEL_STATE_H_
