// CUDA kernels against their CPU references on random data. Needs a GPU; on a CPU-only
// machine every test skips with the reason, so `bazel test //...` stays green.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/cpu/adamw.h"
#include "runtime/cuda/adamw_kernel.h"
#include "runtime/cuda/cast_kernels.h"
#include "runtime/cuda/device.h"
#include "runtime/dtype.h"
#include "tests/runtime/skip_without_gpu.h"

namespace conveyor {
namespace {

#define ASSERT_CUDA_OK(expr)                                                        \
  do {                                                                              \
    const cudaError_t err_ = (expr);                                                \
    ASSERT_EQ(err_, cudaSuccess) << #expr << ": " << cudaGetErrorName(err_) << ": " \
                                 << cudaGetErrorString(err_);                       \
  } while (0)

// Owns one device allocation; freed on scope exit, even when an ASSERT returns early.
template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(int64_t n) : n_(n) {
    if (cudaMalloc(reinterpret_cast<void**>(&ptr_), std::max<int64_t>(n, 1) * sizeof(T)) !=
        cudaSuccess) {
      ptr_ = nullptr;
    }
  }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() const { return ptr_; }
  cudaError_t Upload(const std::vector<T>& host) {
    return cudaMemcpy(ptr_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice);
  }
  cudaError_t Download(std::vector<T>* host) const {
    host->resize(n_);
    return cudaMemcpy(host->data(), ptr_, n_ * sizeof(T), cudaMemcpyDeviceToHost);
  }

 private:
  T* ptr_ = nullptr;
  int64_t n_;
};

class CudaOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_GPU("the CUDA kernels");
    std::printf("%s\n", DescribeBackend(ProbeGpus()).c_str());
  }
};

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// Runs fp32 -> bf16 on the device for `in` and counts bit mismatches with ToBFloat16.
void ExpectCastMatches(const std::vector<float>& in, const char* what) {
  const int64_t n = static_cast<int64_t>(in.size());
  DeviceBuffer<float> d_in(n);
  DeviceBuffer<BFloat16> d_out(n);
  ASSERT_NE(d_in.get(), nullptr);
  ASSERT_NE(d_out.get(), nullptr);
  ASSERT_CUDA_OK(d_in.Upload(in));
  ASSERT_CUDA_OK(LaunchFloatToBFloat16(d_in.get(), d_out.get(), n));
  ASSERT_CUDA_OK(cudaDeviceSynchronize());
  std::vector<BFloat16> out;
  ASSERT_CUDA_OK(d_out.Download(&out));
  int64_t mismatches = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t expected = ToBFloat16(in[i]).bits;
    if (out[i].bits != expected && mismatches++ < 10) {
      ADD_FAILURE() << what << ": fp32 bits 0x" << std::hex << Bits(in[i]) << " -> gpu 0x"
                    << out[i].bits << ", cpu 0x" << expected;
    }
  }
  EXPECT_EQ(mismatches, 0) << what;
}

TEST_F(CudaOpsTest, FloatToBFloat16IsBitExactOnRandomAndSpecialValues) {
  std::mt19937 rng(42);
  std::uniform_int_distribution<uint32_t> any_bits;
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> in;
  const int64_t n = (1 << 20) + 3;  // odd size exercises the tail
  for (int64_t i = 0; i < n; ++i) {
    in.push_back(i % 2 ? normal(rng) : FromBits(any_bits(rng)));  // includes NaN/inf/denormals
  }
  // Exact ties (lower 16 bits 0x8000) with odd and even kept lsb, both signs, and the
  // edges: +-0, +-inf, quiet and signalling NaNs, largest finite (rounds to inf).
  for (uint32_t u : {0x3f808000u, 0x3f818000u, 0xbf808000u, 0xbf818000u, 0x00000000u, 0x80000000u,
                     0x7f800000u, 0xff800000u, 0x7fc00000u, 0x7f800001u, 0xff800001u, 0x7fbfffffu,
                     0x7f7fffffu, 0x00000001u, 0x007fffffu}) {
    in.push_back(FromBits(u));
  }
  ExpectCastMatches(in, "random");
}

TEST_F(CudaOpsTest, FloatToBFloat16IsBitExactOnEveryFloat) {
  // All 2^32 fp32 bit patterns, in chunks of 2^28 (1 GiB of input).
  const int64_t chunk = int64_t{1} << 28;
  std::vector<float> in(chunk);
  for (int64_t start = 0; start < (int64_t{1} << 32); start += chunk) {
    for (int64_t i = 0; i < chunk; ++i) in[i] = FromBits(static_cast<uint32_t>(start + i));
    ExpectCastMatches(in, "exhaustive");
    if (HasFailure()) return;
  }
}

TEST_F(CudaOpsTest, BFloat16ToFloatIsBitExactOnEveryBFloat16) {
  const int64_t n = 1 << 16;
  std::vector<BFloat16> in(n);
  for (int64_t i = 0; i < n; ++i) in[i].bits = static_cast<uint16_t>(i);
  DeviceBuffer<BFloat16> d_in(n);
  DeviceBuffer<float> d_out(n);
  ASSERT_NE(d_in.get(), nullptr);
  ASSERT_NE(d_out.get(), nullptr);
  ASSERT_CUDA_OK(d_in.Upload(in));
  ASSERT_CUDA_OK(LaunchBFloat16ToFloat(d_in.get(), d_out.get(), n));
  ASSERT_CUDA_OK(cudaDeviceSynchronize());
  std::vector<float> out;
  ASSERT_CUDA_OK(d_out.Download(&out));
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(Bits(out[i]), Bits(ToFloat(in[i]))) << "bf16 bits 0x" << std::hex << i;
  }
}

TEST_F(CudaOpsTest, AdamWMatchesCpuReference) {
  const int64_t n = (1 << 20) + 7;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-8, 2);
  std::vector<float> param(n), m(n, 0.0f), v(n, 0.0f), grad(n);
  for (float& p : param) p = normal(rng) * 0.02f;

  DeviceBuffer<float> d_param(n), d_m(n), d_v(n), d_grad(n);
  for (auto* b : {&d_param, &d_m, &d_v, &d_grad}) ASSERT_NE(b->get(), nullptr);
  ASSERT_CUDA_OK(d_param.Upload(param));
  ASSERT_CUDA_OK(d_m.Upload(m));
  ASSERT_CUDA_OK(d_v.Upload(v));

  int64_t exact = 0, total = 0;
  for (int64_t step = 1; step <= 3; ++step) {
    // Gradients spanning ten orders of magnitude, like real layers.
    for (float& g : grad) g = normal(rng) * std::ldexp(1.0f, 3 * exponent(rng));
    const AdamWHyperParams hp{3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, step};
    AdamWStep(hp, grad.data(), param.data(), m.data(), v.data(), n);
    ASSERT_CUDA_OK(d_grad.Upload(grad));
    ASSERT_CUDA_OK(LaunchAdamWStep(hp, d_grad.get(), d_param.get(), d_m.get(), d_v.get(), n));
    ASSERT_CUDA_OK(cudaDeviceSynchronize());

    std::vector<float> gpu_param, gpu_m, gpu_v;
    ASSERT_CUDA_OK(d_param.Download(&gpu_param));
    ASSERT_CUDA_OK(d_m.Download(&gpu_m));
    ASSERT_CUDA_OK(d_v.Download(&gpu_v));
    const struct {
      const char* name;
      const std::vector<float>& cpu;
      const std::vector<float>& gpu;
    } arrays[] = {{"param", param, gpu_param}, {"exp_avg", m, gpu_m}, {"exp_avg_sq", v, gpu_v}};
    for (const auto& a : arrays) {
      for (int64_t i = 0; i < n; ++i) {
        const float want = a.cpu[i], got = a.gpu[i];
        exact += Bits(want) == Bits(got);
        ++total;
        // 1e-6 relative; the tiny absolute floor only matters for values near zero.
        ASSERT_LE(std::fabs(got - want), 1e-6f * std::fabs(want) + 1e-30f)
            << a.name << "[" << i << "] step " << step << ": gpu " << got << " cpu " << want;
      }
    }
  }
  std::printf("AdamW: %lld of %lld values bit-identical to the CPU reference\n",
              static_cast<long long>(exact), static_cast<long long>(total));
  RecordProperty("adamw_bit_identical", std::to_string(exact) + "/" + std::to_string(total));
}

TEST_F(CudaOpsTest, LaunchersRejectBadSizesAndAcceptEmpty) {
  const AdamWHyperParams hp{1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 1};
  EXPECT_EQ(LaunchAdamWStep(hp, nullptr, nullptr, nullptr, nullptr, 0), cudaSuccess);
  EXPECT_EQ(LaunchAdamWStep(hp, nullptr, nullptr, nullptr, nullptr, -1), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchAdamWStep(hp, nullptr, nullptr, nullptr, nullptr, 5), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchFloatToBFloat16(nullptr, nullptr, 0), cudaSuccess);
  EXPECT_EQ(LaunchFloatToBFloat16(nullptr, nullptr, -1), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchBFloat16ToFloat(nullptr, nullptr, 3), cudaErrorInvalidValue);
}

}  // namespace
}  // namespace conveyor
