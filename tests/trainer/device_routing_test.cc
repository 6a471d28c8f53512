// The routing of a GPU job's process groups, checked on the CPU. On a GPU the model's
// tensors are device memory that only NCCL moves, while the trainer's bookkeeping
// (losses, norms, votes) is host memory that gloo moves, and every collective or
// transfer must keep all of its buffers on one side (RoutedCommunicator refuses the
// others). Here each rank treats the memory of its tensors as device memory (a watched
// host memory) and carries it through a second gloo group (FakeDeviceTransport), then
// trains real layouts: an operation that mixed tensor and host buffers would fail the
// run, and the result must equal, bit for bit, the same layout over gloo alone.
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/device_memory.h"
#include "tests/trainer/layout_runs.h"

namespace conveyor::testing_util {
namespace {

// The host memory, remembering which bytes belong to live tensors.
class TensorMemory : public DeviceMemory {
 public:
  explicit TensorMemory(DeviceMemory* host) : host_(host) {}

  bool Contains(const void* p) const {
    const auto* byte = static_cast<const char*>(p);
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.upper_bound(byte);
    if (it == live_.begin()) return false;
    --it;
    return byte < it->first + it->second;
  }

  void* Allocate(int64_t bytes) override { return Remember(host_->Allocate(bytes), bytes); }
  void* AllocateZeroed(int64_t bytes) override {
    return Remember(host_->AllocateZeroed(bytes), bytes);
  }
  void Free(void* p, int64_t bytes) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      live_.erase(static_cast<const char*>(p));
    }
    host_->Free(p, bytes);
  }
  void Zero(void* p, int64_t bytes) override { host_->Zero(p, bytes); }
  void Copy(void* dst, const void* src, int64_t bytes) override { host_->Copy(dst, src, bytes); }
  void CopyFromHost(void* dst, const void* src, int64_t bytes) override {
    host_->CopyFromHost(dst, src, bytes);
  }
  void CopyToHost(void* dst, const void* src, int64_t bytes) override {
    host_->CopyToHost(dst, src, bytes);
  }

 private:
  void* Remember(void* p, int64_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    live_[static_cast<const char*>(p)] = bytes;
    return p;
  }

  DeviceMemory* host_;
  mutable std::mutex mu_;
  std::map<const char*, int64_t> live_;  // start -> bytes
};

// Called in each rank (a fresh child): from here on tensors are "device" memory.
std::unique_ptr<testing_util::FakeDeviceTransport> TensorsAsDeviceMemory() {
  static TensorMemory* memory = [] {
    auto* watched = new TensorMemory(&MemoryOf(Device::kCpu));
    RegisterDeviceMemory(Device::kCpu, watched);
    return watched;
  }();
  return std::make_unique<testing_util::FakeDeviceTransport>(
      [](const void* p) { return memory->Contains(p); });
}

class DeviceRoutingTest : public ::testing::TestWithParam<Layout> {};

TEST_P(DeviceRoutingTest, TensorsTakeTheDeviceTransportAndNothingChanges) {
  const Config config = TinyConfig(GetParam());
  const std::string name = LayoutName(GetParam());
  absl::StatusOr<LayoutRun> gloo_only = RunLayout(config, "gloo_" + name);
  ASSERT_TRUE(gloo_only.ok()) << gloo_only.status();
  absl::StatusOr<LayoutRun> routed = RunLayout(config, "routed_" + name, TensorsAsDeviceMemory);
  ASSERT_TRUE(routed.ok()) << routed.status();

  EXPECT_EQ(routed->losses, gloo_only->losses);
  EXPECT_EQ(routed->grad_norms, gloo_only->grad_norms);
  EXPECT_EQ(routed->params, gloo_only->params);
  ASSERT_EQ(routed->device_operations.size(), config.parallel().nproc_per_node());
  for (size_t rank = 0; rank < routed->device_operations.size(); ++rank) {
    EXPECT_GT(routed->device_operations[rank], 0) << "rank " << rank << " moved no tensor";
  }
}

std::vector<Layout> RoutedLayouts() {
  Layout everything = Pipeline(2, "1f1b", 1, 2);  // TP, SP, PP, DP, distributed optimizer
  everything.tp = 2;
  everything.dp = 2;
  everything.sequence_parallel = true;
  everything.distributed_optimizer = true;
  Layout overlap = TpDp(2, 2, false, false);  // buckets reduced on the communication thread
  overlap.overlap_grad_reduce = true;
  Layout zbv = Pipeline(2, "zbv", 2, 4);  // two chunks per rank, untied embeddings
  zbv.untied = true;
  return {everything, overlap, zbv};
}

INSTANTIATE_TEST_SUITE_P(Layouts, DeviceRoutingTest, ::testing::ValuesIn(RoutedLayouts()),
                         [](const ::testing::TestParamInfo<Layout>& test) {
                           return LayoutName(test.param);
                         });

}  // namespace
}  // namespace conveyor::testing_util
