// ProbeGpus must be safe on any machine; the description must say which backend runs.
#include "runtime/cuda/device.h"

#include <cstdint>
#include <cstdio>
#include <string>

#include "gtest/gtest.h"

namespace conveyor {
namespace {

TEST(DeviceTest, ProbeGpusNeverCrashes) {
  const GpuInfo info = ProbeGpus();
  EXPECT_GE(info.count, 0);
  const std::string description = DescribeBackend(info);
  std::printf("%s\n", description.c_str());
  if (info.count == 0) {
    EXPECT_NE(description.find("CPU backend"), std::string::npos) << description;
    EXPECT_FALSE(info.error.empty());
  } else {
    EXPECT_NE(description.find("CUDA backend"), std::string::npos) << description;
    EXPECT_FALSE(info.name.empty());
    EXPECT_GT(info.total_memory_bytes, 0);
  }
  // Probing twice gives the same answer (no sticky error state left behind).
  EXPECT_EQ(ProbeGpus().count, info.count);
}

TEST(DeviceTest, DescribeCpuBackend) {
  GpuInfo info;
  info.error = "cudaErrorNoDevice (100): no CUDA-capable device is detected";
  EXPECT_EQ(DescribeBackend(info),
            "CPU backend (no CUDA device found: cudaErrorNoDevice (100): no "
            "CUDA-capable device is detected)");
}

TEST(DeviceTest, DescribeCudaBackend) {
  GpuInfo info;
  info.count = 1;
  info.name = "NVIDIA H200";
  info.sm_major = 9;
  info.sm_minor = 0;
  info.total_memory_bytes = int64_t{139} << 30;
  EXPECT_EQ(DescribeBackend(info), "CUDA backend: 1 x NVIDIA H200 (sm_90, 139 GiB)");
}

}  // namespace
}  // namespace conveyor
