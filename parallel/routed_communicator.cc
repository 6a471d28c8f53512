#include "parallel/routed_communicator.h"

#include <utility>

namespace conveyor {

RoutedCommunicator::RoutedCommunicator(std::unique_ptr<Communicator> host,
                                       std::unique_ptr<Communicator> device)
    : host_(std::move(host)), device_(std::move(device)) {}

absl::Status RoutedCommunicator::DoAllReduceSum(const Buffer& data) {
  return Dispatch(data.where, [&](Communicator& c) { return c.AllReduceSum(data); });
}

absl::Status RoutedCommunicator::DoAllReduceMax(const Buffer& data) {
  return Dispatch(data.where, [&](Communicator& c) { return c.AllReduceMax(data); });
}

absl::Status RoutedCommunicator::DoAllGather(const ConstBuffer& in, const Buffer& out) {
  return Dispatch(out.where, [&](Communicator& c) { return c.AllGather(in, out); });
}

absl::Status RoutedCommunicator::DoReduceScatterSum(const ConstBuffer& in, const Buffer& out) {
  return Dispatch(out.where, [&](Communicator& c) { return c.ReduceScatterSum(in, out); });
}

absl::Status RoutedCommunicator::DoBroadcast(const Buffer& data, int root) {
  return Dispatch(data.where, [&](Communicator& c) { return c.Broadcast(data, root); });
}

absl::Status RoutedCommunicator::Barrier() {
  return Dispatch(MemoryKind::kHost, [](Communicator& c) { return c.Barrier(); });
}

absl::Status RoutedCommunicator::DoBatchSendRecv(const std::vector<P2POp>& ops) {
  // Communicator has checked that the batch keeps to one memory kind.
  return Dispatch(ops.front().buffer.where, [&](Communicator& c) { return c.BatchSendRecv(ops); });
}

}  // namespace conveyor
