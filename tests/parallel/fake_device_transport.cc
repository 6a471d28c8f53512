#include "tests/parallel/fake_device_transport.h"

#include <cstring>
#include <utility>

#include "parallel/gloo_communicator.h"

namespace conveyor {
namespace testing_util {

RecordingCommunicator::RecordingCommunicator(std::string name, int rank, int size,
                                             std::unique_ptr<Communicator> inner,
                                             std::vector<std::string>* log)
    : name_(std::move(name)), rank_(rank), size_(size), inner_(std::move(inner)), log_(log) {}

template <typename Forward>
absl::Status RecordingCommunicator::Record(const char* op, Forward forward) {
  log_->push_back(op);
  if (inner_ != nullptr) return forward(*inner_);
  return std::exchange(fail_next_, absl::OkStatus());
}

absl::Status RecordingCommunicator::AllReduceSum(float* data, int64_t n) {
  return Record("AllReduceSum", [&](Communicator& c) { return c.AllReduceSum(data, n); });
}

absl::Status RecordingCommunicator::AllReduceSum(double* data, int64_t n) {
  return Record("AllReduceSum", [&](Communicator& c) { return c.AllReduceSum(data, n); });
}

absl::Status RecordingCommunicator::AllReduceMax(double* data, int64_t n) {
  return Record("AllReduceMax", [&](Communicator& c) { return c.AllReduceMax(data, n); });
}

absl::Status RecordingCommunicator::AllGather(const float* in, int64_t n_per_rank, float* out) {
  return Record("AllGather", [&](Communicator& c) { return c.AllGather(in, n_per_rank, out); });
}

absl::Status RecordingCommunicator::ReduceScatterSum(const float* in, int64_t n_per_rank,
                                                     float* out) {
  return Record("ReduceScatterSum",
                [&](Communicator& c) { return c.ReduceScatterSum(in, n_per_rank, out); });
}

absl::Status RecordingCommunicator::Broadcast(float* data, int64_t n, int root) {
  return Record("Broadcast", [&](Communicator& c) { return c.Broadcast(data, n, root); });
}

absl::Status RecordingCommunicator::Barrier() {
  return Record("Barrier", [](Communicator& c) { return c.Barrier(); });
}

absl::Status RecordingCommunicator::BatchSendRecv(const std::vector<P2POp>& ops) {
  return Record("BatchSendRecv", [&](Communicator& c) { return c.BatchSendRecv(ops); });
}

bool FakeDeviceTransport::IsDeviceMemory(const void* p) const {
  if (is_device_memory_) return is_device_memory_(p);
  const auto* f = static_cast<const float*>(p);
  return f >= arena_.data() && f < arena_.data() + arena_.size();
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
      &device_log_));
}

}  // namespace testing_util
}  // namespace conveyor
