// A group reached two ways sends each operation whole to the side its buffers declare:
// host buffers to the host communicator (gloo), device buffers to the transport's
// (NCCL), whatever the addresses; split operations are refused, and the first error of
// either side breaks the group.
#include "parallel/routed_communicator.h"

#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/parallel/fake_device_transport.h"

namespace conveyor {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing_util::RecordingCommunicator;

class RoutedCommunicatorTest : public ::testing::Test {
 protected:
  RoutedCommunicatorTest() {
    auto host = std::make_unique<RecordingCommunicator>("tp[0,1]", 0, 2, nullptr, &host_log_,
                                                        MemoryKind::kHost);
    auto device = std::make_unique<RecordingCommunicator>("tp[0,1]", 0, 2, nullptr, &device_log_,
                                                          MemoryKind::kDevice);
    device_ = device.get();
    host_ = host.get();
    routed_ = std::make_unique<RoutedCommunicator>(std::move(host), std::move(device));
  }

  // Declared device memory; the route follows the declaration, never the address (these
  // are host arrays, as a GPU's unified addresses would not tell either).
  template <typename T>
  static Buffer Device(T* data, int64_t n) {
    return MakeBuffer(data, n, MemoryKind::kDevice);
  }

  float memory_[16] = {};
  std::vector<std::string> host_log_, device_log_;
  RecordingCommunicator* host_;
  RecordingCommunicator* device_;
  std::unique_ptr<RoutedCommunicator> routed_;
};

TEST_F(RoutedCommunicatorTest, EachOperationTakesTheSideItsBuffersDeclare) {
  float* m = memory_;
  double d = 1.0;
  BFloat16 half[8] = {};
  EXPECT_EQ(routed_->rank(), 0);
  EXPECT_EQ(routed_->size(), 2);
  EXPECT_EQ(routed_->name(), "tp[0,1]");
  EXPECT_TRUE(routed_->Reaches(MemoryKind::kHost) && routed_->Reaches(MemoryKind::kDevice));

  EXPECT_TRUE(routed_->AllReduceSum(m, 8).ok());
  EXPECT_TRUE(routed_->AllReduceSum(Device(m, 8)).ok());
  EXPECT_TRUE(routed_->AllReduceSum(Device(half, 8)).ok());
  EXPECT_TRUE(routed_->AllReduceSum(&d, 1).ok());
  EXPECT_TRUE(routed_->AllReduceMax(Device(&d, 1)).ok());
  EXPECT_TRUE(routed_->AllGather(m, 4, m).ok());
  EXPECT_TRUE(routed_->AllGather(Device(m, 4), Device(m, 8)).ok());  // in place: rank 0
  EXPECT_TRUE(routed_->ReduceScatterSum(Device(m, 8), Device(m + 8, 4)).ok());
  EXPECT_TRUE(routed_->Broadcast(Device(m, 8), 1).ok());
  EXPECT_TRUE(routed_->Barrier().ok());  // orders ranks: always the host side
  EXPECT_TRUE(routed_->BatchSendRecv({{true, 1, Device(m, 8)}, {false, 1, Device(m + 8, 8)}}).ok());
  EXPECT_TRUE(routed_->BatchSendRecv({{true, 1, m, 8}}).ok());
  EXPECT_TRUE(routed_->BatchSendRecv({}).ok());  // nothing to carry: neither side
  EXPECT_TRUE(routed_->AllReduceSum(Device(static_cast<float*>(nullptr), 0)).ok());

  EXPECT_THAT(host_log_,
              ElementsAre("AllReduceSum", "AllReduceSum", "AllGather", "Barrier", "BatchSendRecv"));
  EXPECT_THAT(device_log_,
              ElementsAre("AllReduceSum", "AllReduceSum", "AllReduceMax", "AllGather",
                          "ReduceScatterSum", "Broadcast", "BatchSendRecv", "AllReduceSum"));
}

TEST_F(RoutedCommunicatorTest, RefusesAnOperationSplitBetweenHostAndDevice) {
  const absl::Status gather = routed_->AllGather(MakeBuffer(memory_, 4), Device(memory_ + 8, 8));
  EXPECT_EQ(gather.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(gather.message(),
              AllOf(HasSubstr("AllGather on group tp[0,1]"),
                    HasSubstr("1 of its 2 buffers are declared in device memory")));
  const absl::Status p2p =
      routed_->BatchSendRecv({{true, 1, Device(memory_, 4)}, {false, 1, memory_ + 4, 4}});
  EXPECT_THAT(p2p.message(), HasSubstr("BatchSendRecv on group tp[0,1]"));
  EXPECT_THAT(host_log_, IsEmpty());
  EXPECT_THAT(device_log_, IsEmpty());
}

TEST_F(RoutedCommunicatorTest, TheFirstErrorOfEitherSideBreaksTheGroup) {
  device_->FailNext(absl::DeadlineExceededError("AllReduceSum on tp[0,1] timed out"));
  EXPECT_EQ(routed_->AllReduceSum(Device(memory_, 8)).code(), absl::StatusCode::kDeadlineExceeded);
  const absl::Status later = routed_->AllReduceSum(memory_, 8);
  EXPECT_EQ(later.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(later.message(), HasSubstr("timed out"));
  EXPECT_EQ(routed_->Barrier().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(host_log_, IsEmpty());  // nothing reached the healthy side afterwards
  EXPECT_THAT(device_log_, ElementsAre("AllReduceSum"));
}

}  // namespace
}  // namespace conveyor
