// What the CUDA backend's tests share: comparing a GPU result with the CPU reference
// (every comparison prints one line of numbers, pass or fail, and a non-finite output
// where the reference is finite always fails), random inputs rounded to the compute
// dtype, host/device tensors from values, and the fixture that runs each test with
// CudaOps(kFloat32), compared tightly, and CudaOps(kBFloat16), compared within bf16
// tolerances. Both backends see the same input values, so a difference measures the
// kernels, not the rounding of their inputs.
#ifndef CONVEYOR_TESTS_RUNTIME_CUDA_BACKEND_TESTING_H_
#define CONVEYOR_TESTS_RUNTIME_CUDA_BACKEND_TESTING_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/cpu/cpu_ops.h"
#include "runtime/cuda/cuda_memory.h"
#include "runtime/cuda/cuda_ops.h"
#include "runtime/dtype.h"
#include "runtime/tensor.h"
#include "tests/runtime/skip_without_gpu.h"

namespace conveyor::testing_util {

using Shape = std::vector<int64_t>;
using Values = std::vector<float>;

// ---------------------------------------------------------------------------------------
// Comparison.

// An element passes when |got - want| <= elem_rel |want| + elem_abs max|want| and got is
// finite wherever want is; the whole output when ||got - want|| / ||want|| <= norm_rel.
struct Tolerance {
  double norm_rel;
  double elem_rel;
  double elem_abs;
};

// fp32: the same math in a different order (sums, FMA contraction, expf/tanhf ulps).
constexpr Tolerance kFp32Tolerance{1e-5, 1e-4, 1e-5};
// bf16: inputs are bf16-exact and kernels compute in fp32, so outputs are off by about
// one bf16 rounding (2^-9 relative); the limits leave a margin of 4 to 8.
constexpr Tolerance kBf16Tolerance{1e-2, 1.0 / 64, 1.0 / 256};
// Quantities every backend computes in fp32 whatever the compute dtype (statistics,
// fp32 gradient accumulators fed bf16-exact inputs).
constexpr Tolerance kStatTolerance{1e-5, 1e-4, 1e-5};
constexpr Tolerance kExact{0.0, 0.0, 0.0};
// Attention in fp32: besides the order of sums, the GPU recomputes P from the saved
// log-sum-exp and takes D = rowsum(dO * O) where the CPU has rowsum(dP * P). Still far
// below what any indexing or masking bug would give (errors of order 1).
constexpr Tolerance kFp32AttentionTolerance{1e-4, 1e-3, 1e-4};
// Attention in bf16: cuDNN's fused kernels, like FlashAttention, round P and dS to bf16
// for their tensor-core products, a few bf16 roundings more than the built-in kernels'
// one; the limits keep a margin of about 4 over that (and any indexing or masking bug
// still gives errors of order 1).
constexpr Tolerance kBf16AttentionTolerance{2e-2, 1.0 / 32, 1.0 / 128};

// Names element `index` for messages, e.g. "[3, 17]", or for attention
// "token 5 (sample 0, pos 5), k of group 1, dim 3".
using Locator = std::function<std::string(int64_t index)>;

struct Comparison {
  bool ok = true;
  std::string summary;  // always filled: one line of numbers
  std::string failure;  // why it failed, when it did
};

Locator IndexIn(const Shape& shape);

Comparison Compare(const Values& got, const Values& want, const Tolerance& tol,
                   const Locator& locate);

// Prints the comparison's line and fails the test (with the details) when it fails.
void Check(const std::string& what, const Values& got, const Values& want, const Tolerance& tol,
           const Locator& locate);

float RoundTo(DType dtype, float v);

// n normal(offset, scale) values rounded to `dtype`.
Values Random(int64_t n, uint32_t seed, DType dtype, float scale = 1.0f, float offset = 0.0f);

Tensor HostTensor(const Shape& shape, const Values& v);

// A device tensor of `dtype` holding v (rounded to nearest even when bf16).
Tensor DeviceTensor(const Shape& shape, const Values& v, DType dtype);

// The elements of any tensor, host or device, fp32 or bf16, as floats.
Values ValuesOf(const Tensor& t);

std::string ShapeName(const Shape& s);

// ---------------------------------------------------------------------------------------
// The fixture: a CudaOps of the parameter's compute dtype, synchronised after every op
// so that a failing kernel is named.

class CudaBackendTest : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_GPU("the CUDA backend");
    cuda::InstallDeviceMemory();
    ops_ = std::make_unique<CudaOps>(dtype(), /*synchronize_each_op=*/true);
  }

  DType dtype() const { return GetParam(); }
  const CudaOps& gpu() const { return *ops_; }
  const CpuOps& cpu() const { return CpuOps::Get(); }
  Tolerance tol() const { return dtype() == DType::kFloat32 ? kFp32Tolerance : kBf16Tolerance; }
  Tolerance attention_tol() const {
    return dtype() == DType::kFloat32 ? kFp32AttentionTolerance : kBf16AttentionTolerance;
  }

  // Random activations of the compute dtype (the same values go to both backends).
  Values Act(int64_t n, uint32_t seed, float scale = 1.0f, float offset = 0.0f) const {
    return Random(n, seed, dtype(), scale, offset);
  }
  Tensor Dev(const Shape& shape, const Values& v) const { return DeviceTensor(shape, v, dtype()); }
  Tensor DevZeros(const Shape& shape) const { return gpu().NewActivation(shape); }

  // Weight dtypes to try for bias, gamma, tables: the compute dtype, and fp32 as well.
  std::vector<DType> WeightDTypes() const {
    if (dtype() == DType::kFloat32) return {DType::kFloat32};
    return {DType::kBFloat16, DType::kFloat32};
  }

  // "<Op> bf16 <details>": the prefix of every line this test prints.
  std::string Name(const std::string& op, const std::string& details) const {
    return absl::StrCat(op, " ", DTypeName(dtype()), " ", details);
  }

  void CheckTensor(const std::string& what, const Tensor& got, const Tensor& want,
                   const Tolerance& t) const {
    Check(what, ValuesOf(got), ValuesOf(want), t, IndexIn(want.shape()));
  }

 private:
  std::unique_ptr<CudaOps> ops_;
};

}  // namespace conveyor::testing_util

#endif  // CONVEYOR_TESTS_RUNTIME_CUDA_BACKEND_TESTING_H_
