// One group reached two ways: host buffers travel through `host` (gloo), device
// buffers through `device` (the DeviceTransport's communicator, NCCL). Each operation
// goes whole to one of them, chosen by where its buffers live; an operation whose
// buffers are split between host and device memory is refused, naming it, since no
// single transport can carry it.
//
// Every rank makes the same calls in the same order on buffers of the same kind, so
// both underlying communicators see matching sequences. Once either breaks, every
// later call fails with that first error, as the Communicator contract asks.
#ifndef CONVEYOR_PARALLEL_ROUTED_COMMUNICATOR_H_
#define CONVEYOR_PARALLEL_ROUTED_COMMUNICATOR_H_

#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "base/status_macros.h"
#include "parallel/communicator.h"
#include "parallel/device_transport.h"

namespace conveyor {

class RoutedCommunicator : public Communicator {
 public:
  // `host` and `device` are the same group (same members, same name); `transport`
  // classifies pointers and must outlive this object.
  RoutedCommunicator(std::unique_ptr<Communicator> host, std::unique_ptr<Communicator> device,
                     const DeviceTransport* transport);

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  const std::string& name() const override { return host_->name(); }

  absl::Status AllReduceSum(float* data, int64_t n) override;
  absl::Status AllReduceSum(double* data, int64_t n) override;
  absl::Status AllReduceMax(double* data, int64_t n) override;
  absl::Status AllGather(const float* in, int64_t n_per_rank, float* out) override;
  absl::Status ReduceScatterSum(const float* in, int64_t n_per_rank, float* out) override;
  absl::Status Broadcast(float* data, int64_t n, int root) override;
  // On the host communicator: it orders the ranks, whatever their buffers.
  absl::Status Barrier() override;
  // Zero-length messages do not decide the route (their buffers may be null).
  absl::Status BatchSendRecv(const std::vector<P2POp>& ops) override;

 private:
  // The communicator for an operation on `buffers` (`n` elements each), or an error
  // naming `op` when they are split between host and device memory.
  absl::StatusOr<Communicator*> Route(const char* op, int64_t n,
                                      std::initializer_list<const void*> buffers);
  absl::StatusOr<Communicator*> RouteBuffers(const char* op, absl::Span<const void* const> buffers);
  // Runs `call` on the routed communicator and remembers the first error: every
  // later call returns it.
  template <typename Call>
  absl::Status Dispatch(absl::StatusOr<Communicator*> route, Call call) {
    ASSIGN_OR_RETURN(Communicator* const target, std::move(route));
    absl::Status status = call(*target);
    if (broken_.ok() && !status.ok()) broken_ = status;
    return status;
  }

  std::unique_ptr<Communicator> host_;
  std::unique_ptr<Communicator> device_;
  const DeviceTransport* transport_;
  absl::Status broken_;
};

}  // namespace conveyor

#endif  // CONVEYOR_PARALLEL_ROUTED_COMMUNICATOR_H_
