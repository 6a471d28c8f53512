// The NCCL backend of Communicator, for device (GPU) buffers: every pointer passed
// to an operation is device memory on this rank's CUDA device. The unique id travels
// through the same rendezvous point as gloo's addresses.
//
// Each operation is enqueued on the communicator's own stream, after the work already
// queued on the compute stream (CUDA's legacy default stream), and waited for before
// returning, polling against the group's deadline: a stuck collective aborts the
// communicator (ncclCommAbort) and returns DeadlineExceeded naming the ranks that did
// not arrive (from the ProgressBoard), instead of hanging in a kernel. NCCL's
// reductions are deterministic for a fixed topology and identical on every rank, but
// their summation order is NCCL's (ring or tree), not rank order, so the bits may
// differ from the gloo backend's.
#ifndef CONVEYOR_PARALLEL_NCCL_COMMUNICATOR_H_
#define CONVEYOR_PARALLEL_NCCL_COMMUNICATOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "parallel/communicator.h"
#include "parallel/group.h"
#include "parallel/progress_board.h"
#include "parallel/rendezvous_point.h"

struct ncclComm;
struct CUstream_st;
struct CUevent_st;

namespace conveyor {

class NcclCommunicator : public Communicator {
 public:
  // Every member of `group` calls this concurrently, each with its own CUDA device
  // (NCCL refuses two ranks of one group on one device). Rendezvous happens at
  // `meeting` under "<group name>-nccl".
  static absl::StatusOr<std::unique_ptr<NcclCommunicator>> Create(const GroupSpec& group,
                                                                  const RendezvousPoint& meeting,
                                                                  int cuda_device,
                                                                  absl::Duration timeout);
  ~NcclCommunicator() override;

  int rank() const override { return group_.rank; }
  int size() const override { return static_cast<int>(group_.global_ranks.size()); }
  const std::string& name() const override { return group_.name; }

  // Device memory only.
  bool Reaches(MemoryKind where) const override { return where == MemoryKind::kDevice; }
  absl::Status Barrier() override;

 protected:
  // Each element type goes as NCCL's own (bf16 as ncclBfloat16, summed by NCCL).
  absl::Status DoAllReduceSum(const Buffer& data) override;
  absl::Status DoAllReduceMax(const Buffer& data) override;
  absl::Status DoAllGather(const ConstBuffer& in, const Buffer& out) override;
  absl::Status DoReduceScatterSum(const ConstBuffer& in, const Buffer& out) override;
  absl::Status DoBroadcast(const Buffer& data, int root) override;
  absl::Status DoBatchSendRecv(const std::vector<P2POp>& ops) override;

 private:
  NcclCommunicator(GroupSpec group, ncclComm* comm, int cuda_device,
                   std::unique_ptr<ProgressBoard> board, absl::Duration timeout);

  // Enqueues with `enqueue` (returns an ncclResult_t as int) and waits for the stream.
  template <typename Enqueue>
  absl::Status Run(const char* op, bool collective, const std::vector<int>& peers, int64_t n,
                   Enqueue enqueue);

  GroupSpec group_;
  ncclComm* comm_;
  int cuda_device_;
  CUstream_st* stream_ = nullptr;
  CUevent_st* compute_done_ = nullptr;  // orders each operation after the compute stream
  float* scratch_ = nullptr;            // one device float for Barrier
  std::unique_ptr<ProgressBoard> board_;
  absl::Duration timeout_;
  int64_t seq_ = 0;
  absl::Status broken_;
};

}  // namespace conveyor

#endif  // CONVEYOR_PARALLEL_NCCL_COMMUNICATOR_H_
