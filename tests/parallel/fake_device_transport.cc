#include "tests/parallel/fake_device_transport.h"

#include <cstring>
#include <utility>

#include "parallel/gloo_communicator.h"

namespace conveyor {
namespace testing_util {

namespace {

// The same bytes declared as host memory, which they are here.
Buffer OnHost(Buffer b) {
  b.where = MemoryKind::kHost;
  return b;
}
ConstBuffer OnHost(ConstBuffer b) {
  b.where = MemoryKind::kHost;
  return b;
}

}  // namespace

RecordingCommunicator::RecordingCommunicator(std::string name, int rank, int size,
                                             std::unique_ptr<Communicator> inner,
                                             std::vector<std::string>* log, MemoryKind carries)
    : name_(std::move(name)),
      rank_(rank),
      size_(size),
      inner_(std::move(inner)),
      log_(log),
      carries_(carries) {}

template <typename Forward>
absl::Status RecordingCommunicator::Record(const char* op, Forward forward) {
  log_->push_back(op);
  if (inner_ != nullptr) return forward(*inner_);
  return std::exchange(fail_next_, absl::OkStatus());
}

absl::Status RecordingCommunicator::DoAllReduceSum(const Buffer& data) {
  return Record("AllReduceSum", [&](Communicator& c) { return c.AllReduceSum(OnHost(data)); });
}

absl::Status RecordingCommunicator::DoAllReduceMax(const Buffer& data) {
  return Record("AllReduceMax", [&](Communicator& c) { return c.AllReduceMax(OnHost(data)); });
}

absl::Status RecordingCommunicator::DoAllGather(const ConstBuffer& in, const Buffer& out) {
  return Record("AllGather", [&](Communicator& c) { return c.AllGather(OnHost(in), OnHost(out)); });
}

absl::Status RecordingCommunicator::DoReduceScatterSum(const ConstBuffer& in, const Buffer& out) {
  return Record("ReduceScatterSum",
                [&](Communicator& c) { return c.ReduceScatterSum(OnHost(in), OnHost(out)); });
}

absl::Status RecordingCommunicator::DoBroadcast(const Buffer& data, int root) {
  return Record("Broadcast", [&](Communicator& c) { return c.Broadcast(OnHost(data), root); });
}

absl::Status RecordingCommunicator::Barrier() {
  return Record("Barrier", [](Communicator& c) { return c.Barrier(); });
}

absl::Status RecordingCommunicator::DoBatchSendRecv(const std::vector<P2POp>& ops) {
  return Record("BatchSendRecv", [&](Communicator& c) {
    std::vector<P2POp> on_host;
    for (const P2POp& op : ops) on_host.emplace_back(op.is_send, op.peer, OnHost(op.buffer));
    return c.BatchSendRecv(on_host);
  });
}

void FakeDeviceTransport::Copy(void* dst, const void* src, size_t bytes) const {
  ++copies_;
  std::memcpy(dst, src, bytes);
}

absl::StatusOr<std::unique_ptr<Communicator>> FakeDeviceTransport::Connect(
    const GroupSpec& group, const RendezvousPoint& meeting, absl::Duration timeout) const {
  ++connections_;
  GroupSpec device_group = group;
  device_group.name += ".device";
  absl::StatusOr<std::shared_ptr<gloo::transport::Device>> device = CreateGlooDevice("127.0.0.1");
  if (!device.ok()) return device.status();
  absl::StatusOr<std::unique_ptr<GlooCommunicator>> gloo =
      GlooCommunicator::Create(device_group, meeting, *device, timeout);
  if (!gloo.ok()) return gloo.status();
  return std::unique_ptr<Communicator>(std::make_unique<RecordingCommunicator>(
      group.name, group.rank, static_cast<int>(group.global_ranks.size()), *std::move(gloo),
      &device_log_, MemoryKind::kDevice));
}

}  // namespace testing_util
}  // namespace conveyor
