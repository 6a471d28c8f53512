// CudaOptimizerOps against CpuOptimizerOps on random data: the scale and the SGD and
// AdamW steps bit for bit (the kernels round each fp32 operation like the CPU), the sum
// of squares to double rounding. Needs a GPU; without one every test skips.
#include "runtime/cuda/cuda_optimizer_ops.h"

#include <cuda_runtime_api.h>

#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/cpu/cpu_optimizer_ops.h"
#include "runtime/cuda/cuda_memory.h"
#include "runtime/cuda/device.h"
#include "runtime/tensor.h"
#include "tests/runtime/skip_without_gpu.h"

namespace conveyor {
namespace {

class CudaOptimizerOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_GPU("the optimizer kernels");
    cuda::InstallDeviceMemory();
  }
};

// n normal values (odd sizes exercise the grid-stride tails).
Tensor RandomHost(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  Tensor t = Tensor::Zeros({n}, MemoryCategory::kOther);
  for (int64_t i = 0; i < n; ++i) t.data()[i] = normal(rng);
  return t;
}

Tensor OnGpu(const Tensor& host) { return host.To(Device::kCuda, MemoryCategory::kOther); }

void ExpectBitEqual(const Tensor& cpu, const Tensor& gpu, const char* what) {
  const Tensor back = gpu.To(Device::kCpu, MemoryCategory::kOther);
  int64_t mismatches = 0;
  for (int64_t i = 0; i < cpu.numel(); ++i) {
    if (std::memcmp(&cpu.data()[i], &back.data()[i], sizeof(float)) != 0 && mismatches++ < 5) {
      ADD_FAILURE() << what << "[" << i << "]: cpu " << cpu.data()[i] << ", gpu " << back.data()[i];
    }
  }
  EXPECT_EQ(mismatches, 0) << what << ": of " << cpu.numel() << " elements";
}

constexpr int64_t kSizes[] = {1, 255, 257, 1000003};

TEST_F(CudaOptimizerOpsTest, SumOfSquaresMatchesToDoubleRounding) {
  const CudaOptimizerOps gpu;
  for (int64_t n : kSizes) {
    const Tensor x = RandomHost(n, 1, 3.0f);
    const double want = CpuOptimizerOps::Get().SumOfSquares(x.data(), n);
    const double got = gpu.SumOfSquares(OnGpu(x).data(), n);
    EXPECT_NEAR(got, want, 1e-12 * want) << "n = " << n;
    EXPECT_EQ(got, gpu.SumOfSquares(OnGpu(x).data(), n)) << "not deterministic, n = " << n;
  }
}

TEST_F(CudaOptimizerOpsTest, ScaleIsBitExact) {
  const CudaOptimizerOps gpu;
  for (int64_t n : kSizes) {
    Tensor cpu = RandomHost(n, 2);
    Tensor dev = OnGpu(cpu);
    CpuOptimizerOps::Get().Scale(0.3712345678, cpu.data(), n);
    gpu.Scale(0.3712345678, dev.data(), n);
    ExpectBitEqual(cpu, dev, "scale");
  }
}

TEST_F(CudaOptimizerOpsTest, SgdAndAdamWStepsAreBitExactOverSeveralSteps) {
  const CudaOptimizerOps gpu;
  for (int64_t n : kSizes) {
    Tensor p_cpu = RandomHost(n, 3), m_cpu = Tensor::Zeros({n}, MemoryCategory::kOther);
    Tensor v_cpu = Tensor::Zeros({n}, MemoryCategory::kOther);
    Tensor p_gpu = OnGpu(p_cpu), m_gpu = OnGpu(m_cpu), v_gpu = OnGpu(v_cpu);
    for (int step = 1; step <= 3; ++step) {
      const Tensor g = RandomHost(n, 10 + step, 0.1f);
      const Tensor g_gpu = OnGpu(g);
      const AdamWHyperParams adam{1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, step};
      CpuOptimizerOps::Get().AdamW(adam, g.data(), p_cpu.data(), m_cpu.data(), v_cpu.data(), n);
      gpu.AdamW(adam, g_gpu.data(), p_gpu.data(), m_gpu.data(), v_gpu.data(), n);
      const SgdHyperParams sgd{0.05f, 0.9f, 0.01f, step == 1};
      CpuOptimizerOps::Get().Sgd(sgd, g.data(), p_cpu.data(), m_cpu.data(), n);
      gpu.Sgd(sgd, g_gpu.data(), p_gpu.data(), m_gpu.data(), n);
    }
    ExpectBitEqual(p_cpu, p_gpu, "parameters");
    ExpectBitEqual(m_cpu, m_gpu, "first moment / momentum");
    ExpectBitEqual(v_cpu, v_gpu, "second moment");
  }
}

}  // namespace
}  // namespace conveyor
