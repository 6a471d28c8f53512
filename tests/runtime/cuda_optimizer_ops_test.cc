// CudaOptimizerOps against CpuOptimizerOps on random data: the scale, the add, the bf16
// rounding and widening, the count of zeros, the SGD step and the multi-tensor AdamW step bit for bit (the kernels round each fp32 operation like the CPU), the
// sum of squares to double rounding. Needs a GPU; without one every test skips.
#include "runtime/cuda/cuda_optimizer_ops.h"

#include <cuda_runtime_api.h>

#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/cpu/cpu_optimizer_ops.h"
#include "runtime/cuda/cuda_memory.h"
#include "runtime/cuda/device.h"
#include "runtime/tensor.h"
#include "tests/runtime/cuda_backend_testing.h"
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
  return testing_util::HostTensor({n}, testing_util::Random(n, seed, DType::kFloat32, scale));
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
    const Tensor on_gpu = OnGpu(x);
    const double want = CpuOptimizerOps::Get().SumOfSquares({{x.data(), n}});
    const double got = gpu.SumOfSquares({{on_gpu.data(), n}});
    EXPECT_NEAR(got, want, 1e-12 * want) << "n = " << n;
    EXPECT_EQ(got, gpu.SumOfSquares({{on_gpu.data(), n}})) << "not deterministic, n = " << n;
  }
}

TEST_F(CudaOptimizerOpsTest, ManyArraysInOneLaunchAddUpAsOneByOne) {
  const CudaOptimizerOps gpu;
  std::vector<Tensor> on_host, on_gpu;
  std::vector<FloatArray> host_arrays, gpu_arrays;
  uint32_t seed = 20;
  for (int64_t n : {int64_t{1000003}, int64_t{0}, int64_t{1}, int64_t{257}, int64_t{300000}}) {
    on_host.push_back(RandomHost(n, seed++, 2.0f));
    on_gpu.push_back(OnGpu(on_host.back()));
    host_arrays.push_back({on_host.back().data(), n});
    gpu_arrays.push_back({on_gpu.back().data(), n});
  }
  double one_by_one = 0.0;
  for (const FloatArray& a : gpu_arrays) one_by_one += gpu.SumOfSquares({a});
  // The same additions in the same order: bit for bit.
  EXPECT_EQ(gpu.SumOfSquares(gpu_arrays), one_by_one);
  const double want = CpuOptimizerOps::Get().SumOfSquares(host_arrays);
  EXPECT_NEAR(one_by_one, want, 1e-12 * want);
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

TEST_F(CudaOptimizerOpsTest, AddAndBf16RoundTripAreBitExact) {
  const CudaOptimizerOps gpu;
  for (int64_t n : kSizes) {
    Tensor x = RandomHost(n, 4), y = RandomHost(n, 5);
    Tensor x_dev = OnGpu(x), y_dev = OnGpu(y);
    CpuOptimizerOps::Get().Add(x.data(), y.data(), n);
    gpu.Add(x_dev.data(), y_dev.data(), n);
    ExpectBitEqual(y, y_dev, "add");
    // Round to bf16 and widen back: the distributed optimizer's bf16 values and the
    // bf16 gradient reduction.
    Tensor half = Tensor::Zeros({n}, MemoryCategory::kOther, DType::kBFloat16);
    Tensor half_dev = OnGpu(half);
    CpuOptimizerOps::Get().RoundToBFloat16(y.data(), static_cast<BFloat16*>(half.raw()), n);
    gpu.RoundToBFloat16(y_dev.data(), static_cast<BFloat16*>(half_dev.raw()), n);
    CpuOptimizerOps::Get().WidenFromBFloat16(static_cast<const BFloat16*>(half.raw()), x.data(), n);
    gpu.WidenFromBFloat16(static_cast<const BFloat16*>(half_dev.raw()), x_dev.data(), n);
    ExpectBitEqual(x, x_dev, "bf16 round trip");
  }
}

TEST_F(CudaOptimizerOpsTest, CountZerosCountsEveryArray) {
  const CudaOptimizerOps gpu;
  std::vector<Tensor> host, device;
  std::vector<FloatArray> on_host, on_device;
  for (int64_t n : kSizes) {
    Tensor t = RandomHost(n, 6);
    for (int64_t i = 0; i < n; i += 3) t.data()[i] = (i % 2 == 0) ? 0.0f : -0.0f;
    host.push_back(t);
    device.push_back(OnGpu(t));
    on_host.push_back({host.back().data(), n});
    on_device.push_back({device.back().data(), n});
  }
  EXPECT_EQ(gpu.CountZeros(on_device), CpuOptimizerOps::Get().CountZeros(on_host));
}

TEST_F(CudaOptimizerOpsTest, SgdStepsAreBitExact) {
  const CudaOptimizerOps gpu;
  for (int64_t n : kSizes) {
    Tensor p_cpu = RandomHost(n, 3), buf_cpu = Tensor::Zeros({n}, MemoryCategory::kOther);
    Tensor p_gpu = OnGpu(p_cpu), buf_gpu = OnGpu(buf_cpu);
    for (int step = 1; step <= 3; ++step) {
      const Tensor g = RandomHost(n, 10 + step, 0.1f);
      const SgdHyperParams sgd{0.05f, 0.9f, 0.01f, step == 1};
      CpuOptimizerOps::Get().Sgd(sgd, g.data(), p_cpu.data(), buf_cpu.data(), n);
      gpu.Sgd(sgd, OnGpu(g).data(), p_gpu.data(), buf_gpu.data(), n);
    }
    ExpectBitEqual(p_cpu, p_gpu, "parameters");
    ExpectBitEqual(buf_cpu, buf_gpu, "momentum");
  }
}

// One tensor's arrays on one device, and its AdamW view.
struct AdamState {
  Tensor param, exp_avg, exp_avg_sq, grad;
  float weight_decay;
  AdamWTensor View() {
    return {grad.data(),       param.data(),  exp_avg.data(),
            exp_avg_sq.data(), param.numel(), weight_decay};
  }
};

// Tensors of every size (an empty one too) with their own weight decays, updated together
// in one call (one launch on the GPU) for three steps: bit for bit the CPU's.
TEST_F(CudaOptimizerOpsTest, MultiTensorAdamWIsBitExact) {
  const CudaOptimizerOps gpu;
  std::vector<AdamState> cpu, dev;
  uint32_t seed = 20;
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{255}, int64_t{4097}, int64_t{1000003}}) {
    const float decay = cpu.size() % 2 == 0 ? 0.1f : 0.0f;  // weights and biases alike
    const Tensor zeros = Tensor::Zeros({n}, MemoryCategory::kOther);
    cpu.push_back({RandomHost(n, seed++), zeros.Clone(MemoryCategory::kOther),
                   zeros.Clone(MemoryCategory::kOther), zeros.Clone(MemoryCategory::kOther),
                   decay});
    dev.push_back({OnGpu(cpu.back().param), OnGpu(zeros), OnGpu(zeros), OnGpu(zeros), decay});
  }
  for (int step = 1; step <= 3; ++step) {
    std::vector<AdamWTensor> on_cpu, on_gpu;
    for (size_t t = 0; t < cpu.size(); ++t) {
      cpu[t].grad = RandomHost(cpu[t].param.numel(), seed++, 0.1f);
      dev[t].grad = OnGpu(cpu[t].grad);
      on_cpu.push_back(cpu[t].View());
      on_gpu.push_back(dev[t].View());
    }
    // weight_decay 0.5 here is ignored: each tensor's own applies. The last step clips.
    const AdamWHyperParams hp{1e-3f, 0.9f, 0.95f, 1e-8f, 0.5f, step, step == 3 ? 0.37 : 1.0};
    CpuOptimizerOps::Get().AdamW(hp, on_cpu);
    gpu.AdamW(hp, on_gpu);
  }
  for (size_t t = 0; t < cpu.size(); ++t) {
    ExpectBitEqual(cpu[t].param, dev[t].param, "parameters");
    ExpectBitEqual(cpu[t].exp_avg, dev[t].exp_avg, "first moment");
    ExpectBitEqual(cpu[t].exp_avg_sq, dev[t].exp_avg_sq, "second moment");
  }
}

}  // namespace
}  // namespace conveyor
