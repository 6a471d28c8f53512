// The gloo backend of Communicator, for host (CPU) buffers: one gloo context per
// group, a full mesh of TCP connections, rendezvous through a DirectoryStore in the
// job's run directory.
//
// The collectives are built from gloo's point-to-point primitives rather than gloo's
// own algorithms, for two reasons. Determinism: every element is reduced by one owner
// rank in rank order ((x0 + x1) + x2) + ... and then copied to all, so the bits do not
// depend on which rank computes or on the ring position (a bf16 sum accumulates in fp32
// and rounds once; bf16 travels as 2 bytes an element). Diagnostics: each transfer
// is waited with the group's deadline, and a timeout is reported with the ranks that
// never arrived. A reduction moves the same bytes as a ring (each rank sends and
// receives (size-1)/size of the buffer twice), in one step instead of size-1, which
// suits the few ranks of one host; segmenting is left for large groups.
#ifndef CONVEYOR_PARALLEL_GLOO_COMMUNICATOR_H_
#define CONVEYOR_PARALLEL_GLOO_COMMUNICATOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "parallel/communicator.h"
#include "parallel/group.h"
#include "parallel/progress_board.h"
#include "parallel/rank_order_reduction.h"
#include "parallel/rendezvous_point.h"

namespace gloo {
class Context;
namespace transport {
class Device;
}  // namespace transport
}  // namespace gloo

namespace conveyor {

// A TCP endpoint that every group of this process shares (one event-loop thread).
// `hostname` is the address peers connect to: "127.0.0.1" when all ranks are on
// one host, else this host's name or address; a non-empty `interface`
// (GLOO_SOCKET_IFNAME) binds that network interface's address instead.
absl::StatusOr<std::shared_ptr<gloo::transport::Device>> CreateGlooDevice(
    const std::string& hostname, const std::string& interface = "");

class GlooCommunicator : public Communicator {
 public:
  // Every member of `group` calls this concurrently. Rendezvous happens at `meeting`
  // under the group's name, in two waits of at most `timeout` each: for every member
  // to arrive (else it fails naming the ranks that never came), then for the
  // connections (else it fails naming the members that arrived but never connected,
  // such as one that died in between).
  static absl::StatusOr<std::unique_ptr<GlooCommunicator>> Create(
      const GroupSpec& group, const RendezvousPoint& meeting,
      std::shared_ptr<gloo::transport::Device> device, absl::Duration timeout);
  ~GlooCommunicator() override;

  int rank() const override { return group_.rank; }
  int size() const override { return static_cast<int>(group_.global_ranks.size()); }
  const std::string& name() const override { return group_.name; }
  const GroupSpec& group() const { return group_; }

  // Host memory only: gloo reads and writes buffers with the CPU.
  bool Reaches(MemoryKind where) const override { return where == MemoryKind::kHost; }
  absl::Status Barrier() override;

 protected:
  absl::Status DoAllReduceSum(const Buffer& data) override;
  absl::Status DoAllReduceMax(const Buffer& data) override;
  absl::Status DoAllGather(const ConstBuffer& in, const Buffer& out) override;
  absl::Status DoReduceScatterSum(const ConstBuffer& in, const Buffer& out) override;
  absl::Status DoBroadcast(const Buffer& data, int root) override;
  absl::Status DoBatchSendRecv(const std::vector<P2POp>& ops) override;

 private:
  class Transfers;

  GlooCommunicator(GroupSpec group, std::shared_ptr<gloo::Context> context,
                   std::unique_ptr<ProgressBoard> board, absl::Duration timeout);

  // Reduce-scatter (each rank reduces its chunk of every rank's `in` in rank order,
  // ReduceInRankOrder) then, unless `scatter_only`, all-gather of the reduced chunks
  // into `out`. Chunk r of an all-reduce over `n` elements is [n*r/size, n*(r+1)/size);
  // a reduce-scatter passes `n` elements per rank, equal chunks. Elements travel in
  // their own type (a bf16 chunk is 2 bytes an element).
  absl::Status Reduce(const char* op, Reduction reduction, const ConstBuffer& in, const Buffer& out,
                      int64_t n, bool scatter_only);

  // Runs `body` as collective number ++seq_ (or as point-to-point with `peers`),
  // turning gloo exceptions into a Status and breaking the communicator on error.
  template <typename Body>
  absl::Status Run(const char* op, bool collective, const std::vector<int>& peers, Body body);
  absl::Status CheckUsable(const char* op, int64_t n) const;

  GroupSpec group_;
  std::shared_ptr<gloo::Context> context_;
  std::unique_ptr<ProgressBoard> board_;
  absl::Duration timeout_;
  int64_t seq_ = 0;                 // collectives entered
  std::vector<uint64_t> sends_to_;  // point-to-point messages per peer, for slots
  std::vector<uint64_t> recvs_from_;
  std::vector<char> scratch_;  // received contributions, reused
  absl::Status broken_;        // first error; later calls return it
};

}  // namespace conveyor

#endif  // CONVEYOR_PARALLEL_GLOO_COMMUNICATOR_H_
