// Test doubles for the device side of the process groups, without a device: the
// "device memory" is one host arena, and communicators record the operations they are
// asked for, so a test can see which transport carried what.
#ifndef CONVEYOR_TESTS_PARALLEL_FAKE_DEVICE_TRANSPORT_H_
#define CONVEYOR_TESTS_PARALLEL_FAKE_DEVICE_TRANSPORT_H_

#include <memory>
#include <string>
#include <vector>

#include "parallel/communicator.h"
#include "parallel/device_transport.h"

namespace conveyor {
namespace testing_util {

// Appends each operation's name to `log`, then forwards it to `inner`, or, without
// one, answers OK (or the status set by FailNext) as rank `rank` of `size`. It moves
// buffers in `carries`; when that is device memory, which here is host memory standing
// in for it, the buffers are declared host memory to `inner` (gloo).
class RecordingCommunicator : public Communicator {
 public:
  RecordingCommunicator(std::string name, int rank, int size, std::unique_ptr<Communicator> inner,
                        std::vector<std::string>* log, MemoryKind carries);

  // The next operation answers `status` instead (communicators without `inner`).
  void FailNext(absl::Status status) { fail_next_ = std::move(status); }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }
  bool Reaches(MemoryKind where) const override { return where == carries_; }
  absl::Status Barrier() override;

 protected:
  absl::Status DoAllReduceSum(const Buffer& data) override;
  absl::Status DoAllReduceMax(const Buffer& data) override;
  absl::Status DoAllGather(const ConstBuffer& in, const Buffer& out) override;
  absl::Status DoReduceScatterSum(const ConstBuffer& in, const Buffer& out) override;
  absl::Status DoBroadcast(const Buffer& data, int root) override;
  absl::Status DoBatchSendRecv(const std::vector<P2POp>& ops) override;

 private:
  // Logs `op`; then `forward()` on `inner`, or the pending failure, or OK.
  template <typename Forward>
  absl::Status Record(const char* op, Forward forward);

  std::string name_;
  int rank_;
  int size_;
  std::unique_ptr<Communicator> inner_;
  std::vector<std::string>* log_;
  MemoryKind carries_;
  absl::Status fail_next_;
};

// "Device memory" is host memory: an arena of floats for tests to declare device
// buffers in, or any buffer a caller declares so. Copies are memcpy (counted); Connect
// makes a gloo group named "<group>.device" at the rendezvous point, its operations
// recorded in device_log().
class FakeDeviceTransport : public DeviceTransport {
 public:
  explicit FakeDeviceTransport(size_t arena_floats = 0) : arena_(arena_floats) {}

  float* arena() { return arena_.data(); }
  const std::vector<std::string>& device_log() const { return device_log_; }
  int copies() const { return copies_; }
  int connections() const { return connections_; }

  const std::string& name() const override { return name_; }
  void Copy(void* dst, const void* src, size_t bytes) const override;
  absl::StatusOr<std::unique_ptr<Communicator>> Connect(const GroupSpec& group,
                                                        const RendezvousPoint& meeting,
                                                        absl::Duration timeout) const override;

 private:
  std::string name_ = "fake-device";
  std::vector<float> arena_;
  mutable std::vector<std::string> device_log_;
  mutable int copies_ = 0;
  mutable int connections_ = 0;
};

}  // namespace testing_util
}  // namespace conveyor

#endif  // CONVEYOR_TESTS_PARALLEL_FAKE_DEVICE_TRANSPORT_H_
