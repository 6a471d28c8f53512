#include "parallel/routed_communicator.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"

namespace conveyor {

RoutedCommunicator::RoutedCommunicator(std::unique_ptr<Communicator> host,
                                       std::unique_ptr<Communicator> device,
                                       const DeviceTransport* transport)
    : host_(std::move(host)), device_(std::move(device)), transport_(transport) {}

absl::StatusOr<Communicator*> RoutedCommunicator::Route(
    const char* op, int64_t n, std::initializer_list<const void*> buffers) {
  if (n == 0) return RouteBuffers(op, {});
  return RouteBuffers(op, absl::MakeConstSpan(buffers.begin(), buffers.size()));
}

absl::StatusOr<Communicator*> RoutedCommunicator::RouteBuffers(
    const char* op, absl::Span<const void* const> buffers) {
  RETURN_IF_ERROR(broken_);
  int on_device = 0;
  for (const void* b : buffers) on_device += transport_->IsDeviceMemory(b) ? 1 : 0;
  if (on_device == 0) return host_.get();
  if (on_device == static_cast<int>(buffers.size())) return device_.get();
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s on group %s: %d of its %d buffers are in device memory and the others in host "
      "memory; %s moves device buffers and gloo host buffers, so one operation must keep "
      "all of its buffers on one side",
      op, name(), on_device, buffers.size(), transport_->name()));
}

absl::Status RoutedCommunicator::AllReduceSum(float* data, int64_t n) {
  return Dispatch(Route("AllReduceSum", n, {data}),
                  [&](Communicator& c) { return c.AllReduceSum(data, n); });
}

absl::Status RoutedCommunicator::AllReduceSum(double* data, int64_t n) {
  return Dispatch(Route("AllReduceSum", n, {data}),
                  [&](Communicator& c) { return c.AllReduceSum(data, n); });
}

absl::Status RoutedCommunicator::AllReduceMax(double* data, int64_t n) {
  return Dispatch(Route("AllReduceMax", n, {data}),
                  [&](Communicator& c) { return c.AllReduceMax(data, n); });
}

absl::Status RoutedCommunicator::AllGather(const float* in, int64_t n_per_rank, float* out) {
  return Dispatch(Route("AllGather", n_per_rank, {in, out}),
                  [&](Communicator& c) { return c.AllGather(in, n_per_rank, out); });
}

absl::Status RoutedCommunicator::ReduceScatterSum(const float* in, int64_t n_per_rank, float* out) {
  return Dispatch(Route("ReduceScatterSum", n_per_rank, {in, out}),
                  [&](Communicator& c) { return c.ReduceScatterSum(in, n_per_rank, out); });
}

absl::Status RoutedCommunicator::Broadcast(float* data, int64_t n, int root) {
  return Dispatch(Route("Broadcast", n, {data}),
                  [&](Communicator& c) { return c.Broadcast(data, n, root); });
}

absl::Status RoutedCommunicator::Barrier() {
  return Dispatch(RouteBuffers("Barrier", {}), [](Communicator& c) { return c.Barrier(); });
}

absl::Status RoutedCommunicator::BatchSendRecv(const std::vector<P2POp>& ops) {
  std::vector<const void*> buffers;
  for (const P2POp& op : ops) {
    if (op.n != 0) buffers.push_back(op.data);
  }
  return Dispatch(RouteBuffers("BatchSendRecv", buffers),
                  [&](Communicator& c) { return c.BatchSendRecv(ops); });
}

}  // namespace conveyor
