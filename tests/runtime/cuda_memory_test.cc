// Tensors in GPU memory through the caching allocator. Needs a GPU; on a CPU-only machine
// every test skips with the reason, so `bazel test //...` stays green.
#include "runtime/cuda/cuda_memory.h"

#include <cstdint>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/caching_allocator.h"
#include "runtime/cuda/device.h"
#include "runtime/device_memory.h"
#include "runtime/dtype.h"
#include "runtime/memory_tracker.h"
#include "runtime/tensor.h"
#include "tests/runtime/skip_without_gpu.h"

namespace conveyor {
namespace {

constexpr MemoryCategory kOther = MemoryCategory::kOther;

class CudaMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_GPU("the CUDA memory");
    cuda::InstallDeviceMemory();
  }
};

Tensor HostRange(int64_t n, float scale) {
  Tensor t = Tensor::Zeros({n}, kOther);
  for (int64_t i = 0; i < n; ++i) t.data()[i] = scale * static_cast<float>(i) + 1.0f;
  return t;
}

void ExpectEqualHost(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.device(), Device::kCpu);
  ASSERT_EQ(b.device(), Device::kCpu);
  ASSERT_EQ(a.nbytes(), b.nbytes());
  EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.nbytes()), 0);
}

TEST_F(CudaMemoryTest, ZerosAreZeroEvenInAReusedBlock) {
  const int64_t n = 3 << 20;  // 12 MiB: a large block, reused exactly
  const void* dirty_address;
  {
    Tensor dirty = HostRange(n, 0.5f).To(Device::kCuda, kOther);
    dirty_address = dirty.raw();
  }
  Tensor z = Tensor::Zeros({n}, kOther, DType::kFloat32, Device::kCuda);
  EXPECT_EQ(z.raw(), dirty_address) << "expected the freed block back from the cache";
  EXPECT_EQ(z.device(), Device::kCuda);
  ExpectEqualHost(z.To(Device::kCpu, kOther), Tensor::Zeros({n}, kOther));
}

TEST_F(CudaMemoryTest, PointersAreAlignedFor256ByteLoads) {
  std::vector<Tensor> tensors;
  for (int64_t n : {1, 3, 100, 1000, 4097, 300000, 3000000}) {
    tensors.push_back(Tensor::Zeros({n}, kOther, DType::kBFloat16, Device::kCuda));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(tensors.back().raw()) % 256, 0u) << n;
  }
}

TEST_F(CudaMemoryTest, RoundTripsThroughTheDevice) {
  const Tensor host = HostRange(100003, 0.25f);
  const Tensor device = host.To(Device::kCuda, MemoryCategory::kWeights);
  EXPECT_EQ(device.device(), Device::kCuda);
  EXPECT_EQ(device.category(), MemoryCategory::kWeights);
  ExpectEqualHost(device.To(Device::kCpu, kOther), host);

  // CopyFrom in both directions into existing tensors.
  Tensor device2 = Tensor::Zeros({100003}, kOther, DType::kFloat32, Device::kCuda);
  device2.CopyFrom(host);
  Tensor back = Tensor::Zeros({100003}, kOther);
  back.CopyFrom(device2);
  ExpectEqualHost(back, host);

  // Bytes, not floats: a bf16 tensor comes back bit for bit.
  Tensor bf16 = Tensor::Zeros({1001}, kOther, DType::kBFloat16);
  auto* bits = static_cast<uint16_t*>(bf16.raw());
  for (int i = 0; i < 1001; ++i) bits[i] = static_cast<uint16_t>(i * 37);
  ExpectEqualHost(bf16.To(Device::kCuda, kOther).To(Device::kCpu, kOther), bf16);
}

TEST_F(CudaMemoryTest, CloneOnTheDeviceIsADeepCopy) {
  const Tensor host = HostRange(5000, 2.0f);
  Tensor device = host.To(Device::kCuda, kOther);
  const Tensor clone = device.Clone(MemoryCategory::kOptimizer);
  EXPECT_EQ(clone.device(), Device::kCuda);
  EXPECT_EQ(clone.category(), MemoryCategory::kOptimizer);
  EXPECT_NE(clone.raw(), device.raw());
  device.SetZero();
  ExpectEqualHost(clone.To(Device::kCpu, kOther), host);
  ExpectEqualHost(device.To(Device::kCpu, kOther), Tensor::Zeros({5000}, kOther));
}

TEST_F(CudaMemoryTest, DeviceTensorsAreCountedByCategory) {
  MemoryTracker& tracker = MemoryTracker::Global();
  const int64_t before = tracker.live_bytes(MemoryCategory::kActivations);
  const int64_t in_use_before = cuda::DeviceMemoryStats().bytes_in_use;
  {
    Tensor t = Tensor::Zeros({1000}, MemoryCategory::kActivations, DType::kFloat32, Device::kCuda);
    EXPECT_EQ(tracker.live_bytes(MemoryCategory::kActivations), before + 4000);
    EXPECT_EQ(cuda::DeviceMemoryStats().bytes_in_use,
              in_use_before + CachingAllocator::RoundedSize(4000));
  }
  EXPECT_EQ(tracker.live_bytes(MemoryCategory::kActivations), before);
  EXPECT_EQ(cuda::DeviceMemoryStats().bytes_in_use, in_use_before);
}

// What a training iteration does to memory: stash activations, free them in reverse,
// with gradients and temporaries in between.
void Iteration() {
  std::vector<Tensor> stash;
  for (int layer = 0; layer < 8; ++layer) {
    stash.push_back(Tensor::Zeros({4, 1024, 1024}, MemoryCategory::kActivations, DType::kBFloat16,
                                  Device::kCuda));
    stash.push_back(
        Tensor::Zeros({700, 1024}, MemoryCategory::kActivations, DType::kFloat32, Device::kCuda));
    Tensor tmp = Tensor::Zeros({4096}, kOther, DType::kFloat32, Device::kCuda);
  }
  while (!stash.empty()) {
    Tensor grad = Tensor::Zeros(stash.back().shape(), MemoryCategory::kGrads, stash.back().dtype(),
                                Device::kCuda);
    stash.pop_back();
  }
}

TEST_F(CudaMemoryTest, SteadyStateMakesNoCudaMalloc) {
  Iteration();
  const AllocatorStats warm = cuda::DeviceMemoryStats();
  for (int i = 0; i < 5; ++i) Iteration();
  const AllocatorStats s = cuda::DeviceMemoryStats();
  EXPECT_EQ(s.num_backing_allocations, warm.num_backing_allocations);
  EXPECT_EQ(s.num_backing_releases, warm.num_backing_releases);
  EXPECT_EQ(s.bytes_reserved, warm.bytes_reserved);
  EXPECT_GT(s.num_allocations, warm.num_allocations);

  // EmptyDeviceCache gives the cached segments back (nothing here is in use by now).
  const int64_t in_use = s.bytes_in_use;
  cuda::EmptyDeviceCache();
  EXPECT_LT(cuda::DeviceMemoryStats().bytes_reserved, s.bytes_reserved);
  EXPECT_EQ(cuda::DeviceMemoryStats().bytes_in_use, in_use);
}

TEST_F(CudaMemoryTest, OutOfMemoryExitsNamingTheRequestAndTheFix) {
  // A fresh process for the death test: a forked child cannot use its parent's CUDA context.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // 2^48 floats = 1 PiB: more than any GPU, but under the allocator's own limit, so it is
  // cudaMalloc that refuses (after the cache was released and the call retried).
  EXPECT_EXIT(Tensor::Zeros({int64_t{1} << 48}, MemoryCategory::kActivations, DType::kFloat32,
                            Device::kCuda),
              ::testing::ExitedWithCode(1),
              "CUDA out of memory.*1125899906842624 bytes.*free of.*--micro-batch-size");
}

TEST_F(CudaMemoryTest, FreeingTwiceAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        DeviceMemory& memory = MemoryOf(Device::kCuda);
        void* p = memory.AllocateZeroed(64);
        memory.Free(p, 64);
        memory.Free(p, 64);
      },
      "not a block in use");
}

}  // namespace
}  // namespace conveyor
