// The communicator of a group with one member: collectives are copies or no-ops, so
// a one-process run uses the same code paths as a multi-process one. Given a
// DeviceTransport, it also takes device buffers, and copies them through it.
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
  bool Reaches(MemoryKind where) const override {
    return where == MemoryKind::kHost || transport_ != nullptr;
  }
  absl::Status Barrier() override { return absl::OkStatus(); }

 protected:
  absl::Status DoAllReduceSum(const Buffer&) override { return absl::OkStatus(); }
  absl::Status DoAllReduceMax(const Buffer&) override { return absl::OkStatus(); }
  absl::Status DoAllGather(const ConstBuffer& in, const Buffer& out) override;
  absl::Status DoReduceScatterSum(const ConstBuffer& in, const Buffer& out) override;
  absl::Status DoBroadcast(const Buffer&, int) override { return absl::OkStatus(); }
  // Only sends to and receives from rank 0 (itself); the k-th send is copied into the
  // k-th receive, as messages in one direction match in order, and must agree with it
  // in type and count.
  absl::Status DoBatchSendRecv(const std::vector<P2POp>& ops) override;

 private:
  // Copies `from` into `to` (same bytes; a no-op when they are the same buffer).
  void Copy(const ConstBuffer& from, const Buffer& to) const;

  std::string name_;
  const DeviceTransport* transport_;
};

}  // namespace conveyor

#endif  // CONVEYOR_PARALLEL_SELF_COMMUNICATOR_H_
