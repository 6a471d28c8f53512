// The routing of a GPU job's process groups, checked on the CPU. Every group of several
// ranks gets a device side (FakeDeviceTransport: a second gloo group, recorded) beside
// its host side, as on a GPU, and each operation goes to the side its buffers declare
// (parallel/buffer.h). On the CPU every tensor is host memory and declared so: real
// layouts must train with the device side idle, bit for bit as over gloo alone; an
// operation that declared a CPU tensor device memory would show in the device log, and
// one that mixed declarations would fail the run. Device tensors crossing NCCL are
// checked on GPUs (cuda_parallel_training_test).
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/trainer/layout_runs.h"

namespace conveyor::testing_util {
namespace {

std::unique_ptr<FakeDeviceTransport> DeviceSide() {
  return std::make_unique<FakeDeviceTransport>();
}

class DeviceRoutingTest : public ::testing::TestWithParam<Layout> {};

TEST_P(DeviceRoutingTest, HostTensorsStayOnTheHostSideAndNothingChanges) {
  const Config config = TinyConfig(GetParam());
  const std::string name = LayoutName(GetParam());
  absl::StatusOr<LayoutRun> gloo_only = RunLayout(config, "gloo_" + name);
  ASSERT_TRUE(gloo_only.ok()) << gloo_only.status();
  absl::StatusOr<LayoutRun> routed = RunLayout(config, "routed_" + name, DeviceSide);
  ASSERT_TRUE(routed.ok()) << routed.status();

  EXPECT_EQ(routed->losses, gloo_only->losses);
  EXPECT_EQ(routed->grad_norms, gloo_only->grad_norms);
  EXPECT_EQ(routed->params, gloo_only->params);
  EXPECT_EQ(routed->device_operations, std::vector<int64_t>(config.parallel().nproc_per_node(), 0));
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
