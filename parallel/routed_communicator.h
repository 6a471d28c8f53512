// One group reached two ways: host buffers travel through `host` (gloo), device
// buffers through `device` (the DeviceTransport's communicator, NCCL). Each operation
// goes whole to one of them, chosen by the memory kind its buffers declare; an
// operation whose buffers declare both kinds is refused, naming it (Communicator does
// that for every backend), since no single transport can carry it.
//
// Every rank makes the same calls in the same order on buffers of the same kind, so
// both underlying communicators see matching sequences. Once either breaks, every
// later call fails with that first error, as the Communicator contract asks.
#ifndef CONVEYOR_PARALLEL_ROUTED_COMMUNICATOR_H_
#define CONVEYOR_PARALLEL_ROUTED_COMMUNICATOR_H_

#include <memory>
#include <string>
#include <vector>

#include "base/status_macros.h"
#include "parallel/communicator.h"

namespace conveyor {

class RoutedCommunicator : public Communicator {
 public:
  // `host` and `device` are the same group (same members, same name).
  RoutedCommunicator(std::unique_ptr<Communicator> host, std::unique_ptr<Communicator> device);

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  const std::string& name() const override { return host_->name(); }
  bool Reaches(MemoryKind where) const override { return To(where).Reaches(where); }
  // On the host communicator: it orders the ranks, whatever their buffers.
  absl::Status Barrier() override;

 protected:
  absl::Status DoAllReduceSum(const Buffer& data) override;
  absl::Status DoAllReduceMax(const Buffer& data) override;
  absl::Status DoAllGather(const ConstBuffer& in, const Buffer& out) override;
  absl::Status DoReduceScatterSum(const ConstBuffer& in, const Buffer& out) override;
  absl::Status DoBroadcast(const Buffer& data, int root) override;
  absl::Status DoBatchSendRecv(const std::vector<P2POp>& ops) override;

 private:
  Communicator& To(MemoryKind where) const {
    return where == MemoryKind::kDevice ? *device_ : *host_;
  }
  // Runs `call` on the communicator for `where` and remembers the first error: every
  // later call returns it.
  template <typename Call>
  absl::Status Dispatch(MemoryKind where, Call call) {
    RETURN_IF_ERROR(broken_);
    absl::Status status = call(To(where));
    if (broken_.ok() && !status.ok()) broken_ = status;
    return status;
  }

  std::unique_ptr<Communicator> host_;
  std::unique_ptr<Communicator> device_;
  absl::Status broken_;
};

}  // namespace conveyor

#endif  // CONVEYOR_PARALLEL_ROUTED_COMMUNICATOR_H_
