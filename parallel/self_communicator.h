// The communicator of a group with one member: collectives are copies or no-ops, so
// a one-process run uses the same code paths as a multi-process one.
#ifndef CONVEYOR_PARALLEL_SELF_COMMUNICATOR_H_
#define CONVEYOR_PARALLEL_SELF_COMMUNICATOR_H_

#include <string>
#include <vector>

#include "parallel/communicator.h"

namespace conveyor {

class SelfCommunicator : public Communicator {
 public:
  explicit SelfCommunicator(std::string name = "self") : name_(std::move(name)) {}

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
  std::string name_;
};

}  // namespace conveyor

#endif  // CONVEYOR_PARALLEL_SELF_COMMUNICATOR_H_
