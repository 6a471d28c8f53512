// The communicator of a group with one member: collectives are copies or no-ops, so
// a one-process run uses the same code paths as a multi-process one. Given a
// DeviceTransport, the copies go through it, so buffers may be in device memory.
#ifndef CONVEYOR_PARALLEL_SELF_COMMUNICATOR_H_
#define CONVEYOR_PARALLEL_SELF_COMMUNICATOR_H_

#include <string>
#include <vector>

#include "parallel/communicator.h"
#include "parallel/device_transport.h"

namespace conveyor {

class SelfCommunicator : public Communicator {
 public:
  // `transport` (may be null: host buffers only) must outlive this object.
  explicit SelfCommunicator(std::string name = "self", const DeviceTransport* transport = nullptr)
      : name_(std::move(name)), transport_(transport) {}

  int rank() const override { return 0; }
  int size() const override { return 1; }
  const std::string& name() const override { return name_; }

  absl::Status AllReduceSum(float* data, int64_t n) override;
  absl::Status AllReduceSum(double* data, int64_t n) override;
  absl::Status AllReduceMax(double* data, int64_t n) override;
  absl::Status AllGather(const float* in, int64_t n_per_rank, float* out) override;
  absl::Status ReduceScatterSum(const float* in, int64_t n_per_rank, float* out) override;
  absl::Status Broadcast(float* data, int64_t n, int root) override;
  absl::Status Barrier() override;
  // Only sends to and receives from rank 0 (itself) are valid; the k-th send is copied
  // into the k-th receive, as messages in one direction match in order.
  absl::Status BatchSendRecv(const std::vector<P2POp>& ops) override;

 private:
  // Copies n floats from `from` to `to` (a no-op when they are the same buffer).
  void CopyFloats(const float* from, int64_t n, float* to) const;

  std::string name_;
  const DeviceTransport* transport_;
};

}  // namespace conveyor

#endif  // CONVEYOR_PARALLEL_SELF_COMMUNICATOR_H_
