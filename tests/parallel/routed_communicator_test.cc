// A group reached two ways sends each operation whole to the side that can reach its
// buffers: host buffers to the host communicator (gloo), device buffers to the
// transport's (NCCL); split operations are refused, and the first error of either
// side breaks the group.
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
using testing_util::FakeDeviceTransport;
using testing_util::RecordingCommunicator;

class RoutedCommunicatorTest : public ::testing::Test {
 protected:
  RoutedCommunicatorTest() : transport_(64), device_memory_(transport_.arena()) {
    auto host = std::make_unique<RecordingCommunicator>("tp[0,1]", 0, 2, nullptr, &host_log_);
    auto device = std::make_unique<RecordingCommunicator>("tp[0,1]", 0, 2, nullptr, &device_log_);
    device_ = device.get();
    host_ = host.get();
    routed_ = std::make_unique<RoutedCommunicator>(std::move(host), std::move(device), &transport_);
  }

  FakeDeviceTransport transport_;
  float* device_memory_;
  float host_memory_[16] = {};
  std::vector<std::string> host_log_, device_log_;
  RecordingCommunicator* host_;
  RecordingCommunicator* device_;
  std::unique_ptr<RoutedCommunicator> routed_;
};

TEST_F(RoutedCommunicatorTest, EachOperationTakesTheSideOfItsBuffers) {
  float* dev = device_memory_;
  float* host = host_memory_;
  double host_double = 1.0;
  double* dev_double = reinterpret_cast<double*>(dev + 32);
  EXPECT_EQ(routed_->rank(), 0);
  EXPECT_EQ(routed_->size(), 2);
  EXPECT_EQ(routed_->name(), "tp[0,1]");

  EXPECT_TRUE(routed_->AllReduceSum(host, 8).ok());
  EXPECT_TRUE(routed_->AllReduceSum(dev, 8).ok());
  EXPECT_TRUE(routed_->AllReduceSum(&host_double, 1).ok());
  EXPECT_TRUE(routed_->AllReduceMax(dev_double, 1).ok());
  EXPECT_TRUE(routed_->AllGather(host, 4, host).ok());
  EXPECT_TRUE(routed_->AllGather(dev + 4, 4, dev).ok());
  EXPECT_TRUE(routed_->ReduceScatterSum(dev, 4, dev + 8).ok());
  EXPECT_TRUE(routed_->Broadcast(dev, 8, 1).ok());
  EXPECT_TRUE(routed_->Barrier().ok());  // orders ranks: always the host side
  EXPECT_TRUE(routed_->BatchSendRecv({{true, 1, dev, 8}, {false, 1, dev + 8, 8}}).ok());
  EXPECT_TRUE(routed_->BatchSendRecv({{true, 1, host, 8}}).ok());
  // Zero-length messages (maybe null) do not decide; an empty operation stays on the host.
  EXPECT_TRUE(routed_->BatchSendRecv({{true, 1, nullptr, 0}, {false, 1, dev, 8}}).ok());
  EXPECT_TRUE(routed_->AllReduceSum(static_cast<float*>(nullptr), 0).ok());

  EXPECT_THAT(host_log_, ElementsAre("AllReduceSum", "AllReduceSum", "AllGather", "Barrier",
                                     "BatchSendRecv", "AllReduceSum"));
  EXPECT_THAT(device_log_,
              ElementsAre("AllReduceSum", "AllReduceMax", "AllGather", "ReduceScatterSum",
                          "Broadcast", "BatchSendRecv", "BatchSendRecv"));
}

TEST_F(RoutedCommunicatorTest, RefusesAnOperationSplitBetweenHostAndDevice) {
  const absl::Status gather = routed_->AllGather(host_memory_, 4, device_memory_);
  EXPECT_EQ(gather.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(gather.message(), AllOf(HasSubstr("AllGather on group tp[0,1]"),
                                      HasSubstr("1 of its 2 buffers are in device memory"),
                                      HasSubstr("fake-device")));
  const absl::Status p2p =
      routed_->BatchSendRecv({{true, 1, device_memory_, 4}, {false, 1, host_memory_, 4}});
  EXPECT_THAT(p2p.message(), HasSubstr("BatchSendRecv on group tp[0,1]"));
  EXPECT_THAT(host_log_, IsEmpty());
  EXPECT_THAT(device_log_, IsEmpty());
}

TEST_F(RoutedCommunicatorTest, TheFirstErrorOfEitherSideBreaksTheGroup) {
  device_->FailNext(absl::DeadlineExceededError("AllReduceSum on tp[0,1] timed out"));
  EXPECT_EQ(routed_->AllReduceSum(device_memory_, 8).code(), absl::StatusCode::kDeadlineExceeded);
  const absl::Status later = routed_->AllReduceSum(host_memory_, 8);
  EXPECT_EQ(later.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(later.message(), HasSubstr("timed out"));
  EXPECT_EQ(routed_->Barrier().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(host_log_, IsEmpty());  // nothing reached the healthy side afterwards
  EXPECT_THAT(device_log_, ElementsAre("AllReduceSum"));
}

}  // namespace
}  // namespace conveyor
