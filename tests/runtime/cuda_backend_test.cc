// The CUDA backend (CudaOps) against the CPU reference (CpuOps), op by op, forward and
// backward, on fresh random inputs with fixed seeds. Each test runs twice: with
// CudaOps(kFloat32), compared tightly, and with CudaOps(kBFloat16), compared within bf16
// tolerances. Both backends see the same input values (rounded to bf16 first in the
// bf16 run), so a difference measures the kernels, not the rounding of their inputs.
//
// Every comparison prints one line (op, dtype, shape, max abs/rel error and where, the
// relative error of the whole output) whether it passes or not, so one GPU run shows
// how close each op is. A non-finite output where the reference is finite always fails.
// Needs a GPU; on a CPU-only machine the GPU tests skip with the reason, and only the
// host-side pieces run (the comparison's self-test, the device Philox's host twin, the
// embedding-gradient plan).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "runtime/cpu/cpu_ops.h"
#include "runtime/cuda/cuda_memory.h"
#include "runtime/cuda/cuda_ops.h"
#include "runtime/cuda/cudnn_attention.h"
#include "runtime/cuda/device.h"
#include "runtime/cuda/embedding_kernels.h"
#include "runtime/cuda/philox_uniform.h"
#include "runtime/dtype.h"
#include "runtime/op_params.h"
#include "runtime/philox.h"
#include "runtime/tensor.h"
#include "tests/runtime/skip_without_gpu.h"

namespace conveyor {
namespace {

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

Locator IndexIn(const Shape& shape) {
  return [shape](int64_t index) {
    std::vector<int64_t> coords(shape.size());
    for (int i = static_cast<int>(shape.size()) - 1; i >= 0; --i) {
      coords[i] = shape[i] > 0 ? index % shape[i] : 0;
      index = shape[i] > 0 ? index / shape[i] : 0;
    }
    return absl::StrCat("[", absl::StrJoin(coords, ", "), "]");
  };
}

struct Comparison {
  bool ok = true;
  std::string summary;  // always filled: one line of numbers
  std::string failure;  // why it failed, when it did
};

Comparison Compare(const Values& got, const Values& want, const Tolerance& tol,
                   const Locator& locate) {
  Comparison c;
  if (got.size() != want.size()) {
    c.ok = false;
    c.failure = absl::StrCat("size ", got.size(), " != expected ", want.size());
    c.summary = c.failure;
    return c;
  }
  double max_want = 0.0, diff_sq = 0.0, want_sq = 0.0;
  for (const float w : want) {
    if (std::isfinite(w)) max_want = std::max(max_want, std::fabs(static_cast<double>(w)));
  }
  int64_t max_abs_at = -1, max_rel_at = -1, first_bad = -1, bad = 0, first_nonfinite = -1,
          nonfinite = 0;
  double max_abs = 0.0, max_rel = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    if (!std::isfinite(g) && std::isfinite(w)) {
      if (nonfinite++ == 0) first_nonfinite = static_cast<int64_t>(i);
      continue;
    }
    if (!std::isfinite(w)) continue;  // never produced by these tests' references
    const double d = std::fabs(g - w);
    diff_sq += d * d;
    want_sq += w * w;
    if (d > max_abs || max_abs_at < 0) max_abs = d, max_abs_at = static_cast<int64_t>(i);
    const double rel = d / std::max(std::fabs(w), 1e-30);
    if (rel > max_rel && std::fabs(w) > 1e-3 * max_want) {
      max_rel = rel;
      max_rel_at = static_cast<int64_t>(i);
    }
    if (d > tol.elem_rel * std::fabs(w) + tol.elem_abs * max_want) {
      if (bad++ == 0) first_bad = static_cast<int64_t>(i);
    }
  }
  const double norm_rel =
      want_sq > 0.0 ? std::sqrt(diff_sq / want_sq) : std::sqrt(diff_sq);  // all-zero want
  auto at = [&](int64_t i) {
    return absl::StrCat(locate(i), " (got ", got[i], ", want ", want[i], ")");
  };
  c.summary = absl::StrCat("n=", got.size(), " max|want|=", max_want, "; max abs err ", max_abs,
                           max_abs_at >= 0 ? " at " + at(max_abs_at) : "", "; max rel err ",
                           max_rel, max_rel_at >= 0 ? " at " + locate(max_rel_at) : "",
                           "; ||got-want||/||want|| = ", norm_rel, " (limit ", tol.norm_rel, ")");
  std::vector<std::string> why;
  if (nonfinite > 0) {
    why.push_back(
        absl::StrCat(nonfinite, " non-finite outputs (NaN/Inf), first at ", at(first_nonfinite)));
  }
  if (norm_rel > tol.norm_rel) {
    why.push_back(
        absl::StrCat("relative error of the whole output ", norm_rel, " > ", tol.norm_rel));
  }
  if (bad > 0) {
    why.push_back(absl::StrCat(bad, " elements beyond ", tol.elem_rel, " |want| + ", tol.elem_abs,
                               " max|want|, first at ", at(first_bad)));
  }
  c.ok = why.empty();
  c.failure = absl::StrJoin(why, "; ");
  return c;
}

// Prints the comparison's line and fails the test (with the details) when it fails.
void Check(const std::string& what, const Values& got, const Values& want, const Tolerance& tol,
           const Locator& locate) {
  const Comparison c = Compare(got, want, tol, locate);
  std::printf("[%s] %s: %s\n", c.ok ? "ok  " : "FAIL", what.c_str(), c.summary.c_str());
  std::fflush(stdout);
  if (!c.ok) ADD_FAILURE() << what << ": " << c.failure << "\n  " << c.summary;
}

// ---------------------------------------------------------------------------------------
// Data.

float RoundTo(DType dtype, float v) {
  return dtype == DType::kFloat32 ? v : ToFloat(ToBFloat16(v));
}

// n normal(offset, scale) values rounded to `dtype`.
Values Random(int64_t n, uint32_t seed, DType dtype, float scale = 1.0f, float offset = 0.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(offset, scale);
  Values v(n);
  for (float& x : v) x = RoundTo(dtype, normal(rng));
  return v;
}

Tensor HostTensor(const Shape& shape, const Values& v) {
  Tensor t = Tensor::Zeros(shape, MemoryCategory::kOther);
  std::copy(v.begin(), v.end(), t.data());
  return t;
}

// A device tensor of `dtype` holding v (rounded to nearest even when bf16).
Tensor DeviceTensor(const Shape& shape, const Values& v, DType dtype) {
  Tensor host = Tensor::Zeros(shape, MemoryCategory::kOther, dtype);
  if (dtype == DType::kFloat32) {
    std::copy(v.begin(), v.end(), host.data());
  } else {
    auto* out = static_cast<BFloat16*>(host.raw());
    for (size_t i = 0; i < v.size(); ++i) out[i] = ToBFloat16(v[i]);
  }
  return host.To(Device::kCuda, MemoryCategory::kOther);
}

// The elements of any tensor, host or device, fp32 or bf16, as floats.
Values ValuesOf(const Tensor& t) {
  const Tensor host = t.device() == Device::kCpu ? t : t.To(Device::kCpu, MemoryCategory::kOther);
  Values v(t.numel());
  if (t.dtype() == DType::kFloat32) {
    std::copy(host.data(), host.data() + t.numel(), v.begin());
  } else {
    const auto* in = static_cast<const BFloat16*>(host.raw());
    for (int64_t i = 0; i < t.numel(); ++i) v[i] = ToFloat(in[i]);
  }
  return v;
}

std::string ShapeName(const Shape& s) { return absl::StrCat("[", absl::StrJoin(s, ", "), "]"); }

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

INSTANTIATE_TEST_SUITE_P(ComputeDType, CudaBackendTest,
                         ::testing::Values(DType::kFloat32, DType::kBFloat16),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(DTypeName(info.param));
                         });

// ---------------------------------------------------------------------------------------
// Cast.

TEST_P(CudaBackendTest, CastIsBitExact) {
  for (const int64_t n : {1, 1000, 65537}) {
    const Values v = Random(n, 11 + n, DType::kFloat32, 10.0f);  // not bf16-exact
    const Tensor host = HostTensor({n}, v);
    Tensor want = Tensor::Zeros({n}, MemoryCategory::kOther, dtype());
    cpu().Cast(host, &want);
    Tensor got = DevZeros({n});
    gpu().Cast(DeviceTensor({n}, v, DType::kFloat32), &got);
    CheckTensor(Name("Cast fp32->compute", ShapeName({n})), got, want, kExact);
    Tensor back = gpu().NewFloatActivation({n});
    gpu().Cast(got, &back);
    CheckTensor(Name("Cast compute->fp32", ShapeName({n})), back, want, kExact);
  }
}

// ---------------------------------------------------------------------------------------
// Gemm.

struct GemmCase {
  int64_t m, n, k;
  bool trans_a, trans_b;
  float alpha, beta;
  bool fp32_c;  // accumulate into fp32 (weight gradients); else c has the compute dtype
};

TEST_P(CudaBackendTest, Gemm) {
  const std::vector<GemmCase> cases = {
      {1, 1, 1, false, false, 1.0f, 0.0f, false},
      {37, 53, 29, false, false, 1.0f, 0.0f, false},
      {37, 53, 29, true, false, 1.0f, 0.0f, false},
      {37, 53, 29, false, true, 1.0f, 0.0f, false},
      {37, 53, 29, true, true, 0.5f, 0.0f, false},
      {1, 300, 70, false, true, 1.0f, 0.0f, false},  // one token
      {130, 1, 257, false, false, 1.0f, 0.0f, false},
      {64, 128, 96, false, true, 1.0f, 1.0f, false},  // c += a b^T
      {96, 64, 128, true, false, 1.0f, 1.0f, true},   // dW += x^T dy, fp32 accumulator
      {33, 17, 250, true, false, 1.0f, 1.0f, true},
      {512, 768, 1024, false, true, 1.0f, 0.0f, false},  // a layer-sized product
      {768, 1024, 512, true, false, 1.0f, 1.0f, true},
  };
  uint32_t seed = 100;
  for (const GemmCase& g : cases) {
    const DType c_dtype = g.fp32_c ? DType::kFloat32 : dtype();
    const Shape a_shape = g.trans_a ? Shape{g.k, g.m} : Shape{g.m, g.k};
    const Shape b_shape = g.trans_b ? Shape{g.n, g.k} : Shape{g.k, g.n};
    const Values a = Act(g.m * g.k, seed++), b = Act(g.n * g.k, seed++);
    const Values c0 = Random(g.m * g.n, seed++, c_dtype);
    Tensor want = HostTensor({g.m, g.n}, c0);
    cpu().Gemm(g.trans_a, g.trans_b, g.m, g.n, g.k, g.alpha, HostTensor(a_shape, a),
               HostTensor(b_shape, b), g.beta, &want);
    Tensor got = DeviceTensor({g.m, g.n}, c0, c_dtype);
    gpu().Gemm(g.trans_a, g.trans_b, g.m, g.n, g.k, g.alpha, Dev(a_shape, a), Dev(b_shape, b),
               g.beta, &got);
    // An fp32 accumulator of bf16-exact products: nearly as exact as the fp32 path (tensor
    // cores may add with less than round-to-nearest fp32, hence not kStatTolerance).
    const Tolerance t = g.fp32_c && dtype() == DType::kBFloat16 ? kFp32AttentionTolerance : tol();
    CheckTensor(Name("Gemm", absl::StrCat("m=", g.m, " n=", g.n, " k=", g.k, " trans_a=", g.trans_a,
                                          " trans_b=", g.trans_b, " alpha=", g.alpha,
                                          " beta=", g.beta, " c=", DTypeName(c_dtype))),
                got, want, t);
  }
}

TEST_P(CudaBackendTest, GemmPlansAreCachedPerShape) {
  const Values a = Act(48 * 32, 1), b = Act(32 * 40, 2);
  Tensor c = DevZeros({48, 40});
  gpu().Gemm(false, false, 48, 40, 32, 1.0f, Dev({48, 32}, a), Dev({32, 40}, b), 0.0f, &c);
  const int64_t after_first = gpu().gemm_heuristic_queries();
  for (int i = 0; i < 5; ++i) {
    gpu().Gemm(false, false, 48, 40, 32, 1.0f, Dev({48, 32}, a), Dev({32, 40}, b), 0.0f, &c);
  }
  EXPECT_EQ(gpu().gemm_heuristic_queries(), after_first)
      << "a repeated GEMM shape ran new cuBLASLt heuristic queries";
  std::printf("Gemm: %lld heuristic queries after 6 calls of one shape\n",
              static_cast<long long>(gpu().gemm_heuristic_queries()));
}

// ---------------------------------------------------------------------------------------
// Bias, residual add, learned positions.

const std::vector<Shape>& RowShapes() {  // [rows, width]
  static const auto* shapes =
      new std::vector<Shape>{{1, 1}, {1, 33}, {7, 33}, {300, 1000}, {4096, 1024}};
  return *shapes;
}

TEST_P(CudaBackendTest, AddBiasAndBiasGrad) {
  uint32_t seed = 200;
  for (const Shape& s : RowShapes()) {
    for (const DType wdt : WeightDTypes()) {
      const Values y = Act(s[0] * s[1], seed++), bias = Random(s[1], seed++, wdt);
      Tensor want = HostTensor(s, y);
      cpu().AddBias(HostTensor({s[1]}, bias), &want);
      Tensor got = Dev(s, y);
      gpu().AddBias(DeviceTensor({s[1]}, bias, wdt), &got);
      CheckTensor(Name("AddBias", ShapeName(s) + " bias " + std::string(DTypeName(wdt))), got, want,
                  tol());
    }
    const Values dy = Act(s[0] * s[1], seed++), db0 = Random(s[1], seed++, DType::kFloat32);
    Tensor want = HostTensor({s[1]}, db0);
    cpu().AccumulateBiasGrad(HostTensor(s, dy), &want);
    Tensor got = DeviceTensor({s[1]}, db0, DType::kFloat32);
    gpu().AccumulateBiasGrad(Dev(s, dy), &got);
    CheckTensor(Name("AccumulateBiasGrad", ShapeName(s)), got, want, kStatTolerance);
  }
}

TEST_P(CudaBackendTest, Add) {
  uint32_t seed = 300;
  for (const Shape& s : RowShapes()) {
    const Values x = Act(s[0] * s[1], seed++), y = Act(s[0] * s[1], seed++);
    Tensor want = HostTensor(s, y);
    cpu().Add(HostTensor(s, x), &want);
    Tensor got = Dev(s, y);
    gpu().Add(Dev(s, x), &got);
    CheckTensor(Name("Add", ShapeName(s)), got, want, tol());
  }
}

struct PositionCase {
  int64_t rows, width, seq, first_row;
};

TEST_P(CudaBackendTest, PositionRowsAndGrad) {
  const std::vector<PositionCase> cases = {
      {1, 8, 1, 0}, {12, 24, 5, 3}, {128, 33, 64, 0}, {100, 64, 64, 70}, {2048, 256, 1024, 0}};
  uint32_t seed = 400;
  for (const PositionCase& c : cases) {
    const std::string shape = absl::StrCat("rows=", c.rows, " width=", c.width, " seq=", c.seq,
                                           " first_row=", c.first_row);
    const Shape x_shape{c.rows, c.width}, table_shape{c.seq, c.width};
    for (const DType wdt : WeightDTypes()) {
      const Values x = Act(c.rows * c.width, seed++);
      const Values table = Random(c.seq * c.width, seed++, wdt);
      Tensor want = HostTensor(x_shape, x);
      cpu().AddPositionRows(HostTensor(table_shape, table), c.first_row, c.seq, &want);
      Tensor got = Dev(x_shape, x);
      gpu().AddPositionRows(DeviceTensor(table_shape, table, wdt), c.first_row, c.seq, &got);
      CheckTensor(Name("AddPositionRows", shape + " table " + std::string(DTypeName(wdt))), got,
                  want, tol());
    }
    const Values dx = Act(c.rows * c.width, seed++);
    const Values d0 = Random(c.seq * c.width, seed++, DType::kFloat32);
    Tensor want = HostTensor(table_shape, d0);
    cpu().AccumulatePositionGrad(HostTensor(x_shape, dx), c.first_row, c.seq, &want);
    Tensor got = DeviceTensor(table_shape, d0, DType::kFloat32);
    gpu().AccumulatePositionGrad(Dev(x_shape, dx), c.first_row, c.seq, &got);
    CheckTensor(Name("AccumulatePositionGrad", shape), got, want, kStatTolerance);
  }
}

// ---------------------------------------------------------------------------------------
// Norms: forward (y, mean, rstd), backward input (dx) and weight (dgamma, dbeta), each
// backward fed the CPU's statistics so that it is checked on its own.

struct NormCase {
  NormKind kind;
  int64_t rows, width;
};

TEST_P(CudaBackendTest, Norms) {
  std::vector<NormCase> cases;
  for (const NormKind kind : {NormKind::kLayerNorm, NormKind::kRmsNorm}) {
    for (const Shape& s : std::vector<Shape>{{1, 8}, {5, 33}, {64, 1000}, {2048, 4096}}) {
      cases.push_back({kind, s[0], s[1]});
    }
  }
  const float eps = 1e-5f;
  uint32_t seed = 500;
  for (const NormCase& c : cases) {
    const bool ln = c.kind == NormKind::kLayerNorm;
    const Shape xs{c.rows, c.width};
    for (const DType wdt : WeightDTypes()) {
      const std::string name =
          absl::StrCat(ln ? "LayerNorm" : "RMSNorm", " ", ShapeName(xs), " gamma ", DTypeName(wdt));
      // An offset mean checks the variance is taken about the mean.
      const Values x = Act(c.rows * c.width, seed++, 2.0f, 3.0f);
      const Values gamma = Random(c.width, seed++, wdt, 0.5f, 1.0f);
      const Values beta = Random(c.width, seed++, wdt, 0.5f);
      const Tensor hbeta = HostTensor({c.width}, beta);
      const Tensor dbeta_tensor = DeviceTensor({c.width}, beta, wdt);

      Tensor y = HostTensor(xs, Values(x.size())), mean = HostTensor({c.rows}, Values(c.rows)),
             rstd = HostTensor({c.rows}, Values(c.rows));
      cpu().NormForward(c.kind, HostTensor(xs, x), HostTensor({c.width}, gamma),
                        ln ? &hbeta : nullptr, eps, &y, &mean, &rstd);
      Tensor gy = DevZeros(xs), gmean = gpu().NewFloatActivation({c.rows}),
             grstd = gpu().NewFloatActivation({c.rows});
      gpu().NormForward(c.kind, Dev(xs, x), DeviceTensor({c.width}, gamma, wdt),
                        ln ? &dbeta_tensor : nullptr, eps, &gy, &gmean, &grstd);
      CheckTensor(Name("NormForward y", name), gy, y, tol());
      CheckTensor(Name("NormForward mean", name), gmean, mean, kStatTolerance);
      CheckTensor(Name("NormForward rstd", name), grstd, rstd, kStatTolerance);

      const Values dy = Act(c.rows * c.width, seed++);
      const Tensor dmean = DeviceTensor({c.rows}, ValuesOf(mean), DType::kFloat32);
      const Tensor drstd = DeviceTensor({c.rows}, ValuesOf(rstd), DType::kFloat32);
      Tensor dx = HostTensor(xs, Values(x.size()));
      cpu().NormBackwardInput(c.kind, HostTensor(xs, dy), HostTensor(xs, x),
                              HostTensor({c.width}, gamma), mean, rstd, &dx);
      Tensor gdx = DevZeros(xs);
      gpu().NormBackwardInput(c.kind, Dev(xs, dy), Dev(xs, x), DeviceTensor({c.width}, gamma, wdt),
                              dmean, drstd, &gdx);
      CheckTensor(Name("NormBackwardInput dx", name), gdx, dx, tol());

      if (wdt != dtype()) continue;  // the weight gradient does not read gamma
      const Values g0 = Random(c.width, seed++, DType::kFloat32);
      const Values b0 = Random(c.width, seed++, DType::kFloat32);
      Tensor dgamma = HostTensor({c.width}, g0), dbeta = HostTensor({c.width}, b0);
      cpu().NormBackwardWeight(HostTensor(xs, dy), HostTensor(xs, x), mean, rstd, &dgamma,
                               ln ? &dbeta : nullptr);
      Tensor gdgamma = DeviceTensor({c.width}, g0, DType::kFloat32);
      Tensor gdbeta = DeviceTensor({c.width}, b0, DType::kFloat32);
      gpu().NormBackwardWeight(Dev(xs, dy), Dev(xs, x), dmean, drstd, &gdgamma,
                               ln ? &gdbeta : nullptr);
      CheckTensor(Name("NormBackwardWeight dgamma", name), gdgamma, dgamma, kStatTolerance);
      if (ln) CheckTensor(Name("NormBackwardWeight dbeta", name), gdbeta, dbeta, kStatTolerance);
    }
  }
}

// ---------------------------------------------------------------------------------------
// Activations.

TEST_P(CudaBackendTest, Gelu) {
  uint32_t seed = 600;
  for (const int64_t n : {1, 1000, 65537, 1 << 22}) {
    const Shape s{n};
    const Values x = Act(n, seed++, 3.0f), dy = Act(n, seed++);
    Tensor y = HostTensor(s, Values(n)), dx = HostTensor(s, Values(n));
    cpu().GeluForward(HostTensor(s, x), &y);
    cpu().GeluBackward(HostTensor(s, x), HostTensor(s, dy), &dx);
    Tensor gy = DevZeros(s), gdx = DevZeros(s);
    gpu().GeluForward(Dev(s, x), &gy);
    gpu().GeluBackward(Dev(s, x), Dev(s, dy), &gdx);
    CheckTensor(Name("GeluForward", ShapeName(s)), gy, y, tol());
    CheckTensor(Name("GeluBackward", ShapeName(s)), gdx, dx, tol());
  }
}

TEST_P(CudaBackendTest, Swiglu) {
  uint32_t seed = 700;
  for (const Shape& s : std::vector<Shape>{{1, 1}, {7, 33}, {64, 1000}, {2048, 2752}}) {
    const Shape xs{s[0], 2 * s[1]};
    const Values x = Act(s[0] * 2 * s[1], seed++, 3.0f), dy = Act(s[0] * s[1], seed++);
    Tensor y = HostTensor(s, Values(s[0] * s[1])), dx = HostTensor(xs, Values(x.size()));
    cpu().SwigluForward(HostTensor(xs, x), &y);
    cpu().SwigluBackward(HostTensor(xs, x), HostTensor(s, dy), &dx);
    Tensor gy = DevZeros(s), gdx = DevZeros(xs);
    gpu().SwigluForward(Dev(xs, x), &gy);
    gpu().SwigluBackward(Dev(xs, x), Dev(s, dy), &gdx);
    CheckTensor(Name("SwigluForward", ShapeName(s)), gy, y, tol());
    CheckTensor(Name("SwigluBackward", ShapeName(s)), gdx, dx, tol());
  }
}

// ---------------------------------------------------------------------------------------
// Dropout: the mask must be the CPU's, element for element.

// Counts elements dropped by one side only (inputs are nonzero, so 0 means dropped).
void ExpectSameMask(const std::string& what, const Values& got, const Values& want) {
  int64_t mismatches = 0, first = -1, dropped = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    dropped += want[i] == 0.0f;
    if ((got[i] == 0.0f) != (want[i] == 0.0f) && mismatches++ == 0) first = i;
  }
  std::printf("[%s] %s mask: %lld of %zu dropped by the CPU, %lld mismatches\n",
              mismatches == 0 ? "ok  " : "FAIL", what.c_str(), static_cast<long long>(dropped),
              want.size(), static_cast<long long>(mismatches));
  EXPECT_EQ(mismatches, 0) << what << ": dropout mask differs from the CPU's, first at element "
                           << first << " (got " << got[first] << ", want " << want[first] << ")";
}

TEST_P(CudaBackendTest, DropoutDrawsTheCpuMask) {
  const CounterRng rng(0x1234567890abcdefull, MixStream(StreamId("layers.3.mlp.dropout"), 17));
  struct Case {
    int64_t n;
    float p;
    uint64_t first_index;
    bool in_place;
  };
  const std::vector<Case> cases = {{1, 0.1f, 0, false},
                                   {100003, 0.1f, 12345678901ull, false},  // > 2^32
                                   {65536, 0.1f, 7, true},
                                   {1000, 0.0f, 5, false},
                                   {1 << 20, 0.5f, 3, false}};
  uint32_t seed = 800;
  for (const Case& c : cases) {
    const std::string name =
        Name("Dropout", absl::StrCat("n=", c.n, " p=", c.p, " first_index=", c.first_index,
                                     c.in_place ? " in place" : ""));
    Values x = Act(c.n, seed++);
    for (float& v : x) v = v == 0.0f ? 1.0f : v;  // nonzero, so 0 marks a dropped element
    Tensor want = HostTensor({c.n}, Values(c.n));
    cpu().Dropout(rng, c.p, c.first_index, HostTensor({c.n}, x), &want);
    Tensor in = Dev({c.n}, x);
    Tensor got = c.in_place ? in : DevZeros({c.n});
    gpu().Dropout(rng, c.p, c.first_index, in, &got);
    const Values g = ValuesOf(got), w = ValuesOf(want);
    ExpectSameMask(name, g, w);
    // fp32: the same single multiply as the CPU, so the kept values are bit-identical.
    Check(name, g, w, dtype() == DType::kFloat32 ? kExact : tol(), IndexIn({c.n}));
  }
}

// ---------------------------------------------------------------------------------------
// RoPE and attention over the fused, grouped QKV layout.

std::string AttentionName(const AttentionShape& s) {
  return absl::StrCat("batch=", s.batch, " seq=", s.seq, " groups=", s.groups,
                      " heads/group=", s.heads_per_group, " head_dim=", s.head_dim);
}

// Names an element of a [batch * seq, qkv_width] tensor by sample, position, head part.
Locator QkvLocator(const AttentionShape& s) {
  return [s](int64_t index) {
    const int64_t token = index / s.qkv_width(), col = index % s.qkv_width();
    const int64_t group_width = (s.heads_per_group + 2) * s.head_dim;
    const int64_t g = col / group_width, slot = (col % group_width) / s.head_dim;
    const int64_t dim = col % s.head_dim;
    const std::string part =
        slot < s.heads_per_group
            ? absl::StrCat("q of head ", g * s.heads_per_group + slot)
            : absl::StrCat(slot == s.heads_per_group ? "k" : "v", " of group ", g);
    return absl::StrCat("token ", token, " (sample ", token / s.seq, ", pos ", token % s.seq, "), ",
                        part, ", dim ", dim);
  };
}

// Names an element of ctx [batch * seq, heads * head_dim].
Locator ContextLocator(const AttentionShape& s) {
  return [s](int64_t index) {
    const int64_t width = s.heads() * s.head_dim;
    const int64_t token = index / width, col = index % width;
    return absl::StrCat("token ", token, " (sample ", token / s.seq, ", pos ", token % s.seq,
                        "), head ", col / s.head_dim, ", dim ", col % s.head_dim);
  };
}

TEST_P(CudaBackendTest, RotateQueriesAndKeys) {
  const std::vector<AttentionShape> shapes = {
      {1, 1, 1, 1, 2}, {2, 7, 2, 3, 16}, {2, 37, 1, 4, 64}, {1, 130, 2, 2, 128}};
  uint32_t seed = 900;
  for (const AttentionShape& s : shapes) {
    const RopeTable table(s.seq, s.head_dim, 10000.0f);
    const Shape qs{s.batch * s.seq, s.qkv_width()};
    for (const bool inverse : {false, true}) {
      const Values qkv = Act(qs[0] * qs[1], seed++);
      Tensor want = HostTensor(qs, qkv);
      cpu().RotateQueriesAndKeys(table, s, inverse, &want);
      Tensor got = Dev(qs, qkv);
      gpu().RotateQueriesAndKeys(table, s, inverse, &got);
      Check(Name("RotateQueriesAndKeys", AttentionName(s) + (inverse ? " inverse" : "")),
            ValuesOf(got), ValuesOf(want), tol(), QkvLocator(s));
    }
  }
}

struct AttentionCase {
  AttentionShape shape;
  float dropout_p;
};

TEST_P(CudaBackendTest, Attention) {
  const std::vector<AttentionCase> cases = {
      {{1, 1, 1, 1, 8}, 0.0f},      // one token
      {{2, 37, 2, 3, 16}, 0.0f},    // GQA, seq not a multiple of the 32-row tile
      {{1, 64, 1, 4, 64}, 0.0f},    // multi-query
      {{2, 100, 2, 1, 24}, 0.0f},   // multi-head, odd head_dim
      {{1, 130, 1, 2, 128}, 0.0f},  // head_dim 128 (over 48 KiB of shared memory)
      {{1, 33, 1, 1, 256}, 0.0f},   // largest head_dim
      {{2, 45, 2, 2, 32}, 0.1f},    // attention dropout, on a tensor-parallel slice
      {{2, 512, 4, 2, 64}, 0.0f},   // a layer-sized case
  };
  uint32_t seed = 1000;
  for (const AttentionCase& c : cases) {
    const AttentionShape& s = c.shape;
    const std::string name =
        AttentionName(s) + (c.dropout_p > 0 ? absl::StrCat(" dropout p=", c.dropout_p) : "");
    const CounterRng rng(77, StreamId("attention.dropout"));
    AttentionDropout dropout;
    if (c.dropout_p > 0) {
      // As a tensor-parallel rank holding heads [3, 3 + heads) of heads + 8, in a data-
      // parallel rank whose first sample is sample 5.
      dropout = {&rng, c.dropout_p, /*first_sample=*/5, /*first_head=*/3,
                 /*total_heads=*/s.heads() + 8};
    }
    const float scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
    const Shape qs{s.batch * s.seq, s.qkv_width()}, cs{s.batch * s.seq, s.heads() * s.head_dim};
    const Values qkv = Act(qs[0] * qs[1], seed++, 1.5f);

    Tensor probs, ctx = HostTensor(cs, Values(cs[0] * cs[1]));
    cpu().AttentionForward(s, HostTensor(qs, qkv), scale, dropout, &probs, &ctx);
    const Tensor gqkv = Dev(qs, qkv);
    Tensor saved, gctx = DevZeros(cs);
    gpu().AttentionForward(s, gqkv, scale, dropout, &saved, &gctx);
    Check(Name("AttentionForward ctx", name), ValuesOf(gctx), ValuesOf(ctx), attention_tol(),
          ContextLocator(s));

    // Backward: each backend from its own forward (the GPU's saved is the log-sum-exp).
    const Values dctx = Act(cs[0] * cs[1], seed++);
    Tensor dqkv = HostTensor(qs, Values(qkv.size()));
    cpu().AttentionBackward(s, HostTensor(qs, qkv), probs, ctx, HostTensor(cs, dctx), scale,
                            dropout, &dqkv);
    Tensor gdqkv = DevZeros(qs);
    gpu().AttentionBackward(s, gqkv, saved, gctx, Dev(cs, dctx), scale, dropout, &gdqkv);
    Check(Name("AttentionBackward dqkv", name), ValuesOf(gdqkv), ValuesOf(dqkv), attention_tol(),
          QkvLocator(s));
  }
}

// ---------------------------------------------------------------------------------------
// Attention by both GPU paths: cuDNN's fused kernels (bf16 without dropout, for the shapes
// cuDNN takes) and the built-in ones (a second CudaOps with cuDNN off). Each is checked
// against the CPU; their saved log-sum-exps against each other and against one computed
// here in double; and each backward runs from the other path's forward as well, since the
// two must stay interchangeable (a shape cuDNN declines in one direction only, or a
// recomputed forward). Every case prints which path ran.

// The natural-log log-sum-exp of each scaled, causally masked score row, in double,
// [batch, heads, seq]: what `saved` holds on both GPU paths.
Values ReferenceLogSumExp(const AttentionShape& s, const Values& qkv, float scale) {
  const int64_t w = s.qkv_width(), d = s.head_dim, group = (s.heads_per_group + 2) * d;
  Values lse(s.batch * s.heads() * s.seq);
  std::vector<double> row(s.seq);
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads(); ++h) {
      const int64_t g = h / s.heads_per_group;
      const int64_t q_at = g * group + (h % s.heads_per_group) * d;
      const int64_t k_at = g * group + s.heads_per_group * d;
      for (int64_t i = 0; i < s.seq; ++i) {
        const float* q = qkv.data() + (b * s.seq + i) * w + q_at;
        double max = -INFINITY;
        for (int64_t j = 0; j <= i; ++j) {
          const float* k = qkv.data() + (b * s.seq + j) * w + k_at;
          double dot = 0.0;
          for (int64_t x = 0; x < d; ++x) dot += static_cast<double>(q[x]) * k[x];
          row[j] = scale * dot;
          max = std::max(max, row[j]);
        }
        double sum = 0.0;
        for (int64_t j = 0; j <= i; ++j) sum += std::exp(row[j] - max);
        lse[(b * s.heads() + h) * s.seq + i] = static_cast<float>(max + std::log(sum));
      }
    }
  }
  return lse;
}

// Which path an op took: the cuDNN count before and after it.
std::string PathName(int64_t cudnn_before, int64_t cudnn_after) {
  return cudnn_after > cudnn_before ? "cuDNN" : "built-in";
}

struct PathCase {
  AttentionShape shape;
  float dropout_p;
  bool cudnn;  // in bf16, cuDNN must take it (on a Hopper GPU with cuDNN 9)
};

std::vector<PathCase> PathCases() {
  return {
      {{2, 128, 4, 1, 64}, 0.0f, true},    // multi-head: Q, K, V strided views of qkv
      {{1, 1024, 12, 1, 64}, 0.0f, true},  // a GPT-2 small layer
      {{2, 100, 2, 1, 128}, 0.0f, true},   // seq not a multiple of 64, head_dim 128
      {{1, 64, 1, 4, 64}, 0.0f, true},     // multi-query: Q's heads equally spaced
      {{2, 96, 2, 3, 64}, 0.0f, true},     // grouped-query: Q through a packed copy
      {{2, 45, 2, 1, 32}, 0.1f, false},    // dropout: the built-in kernels, the CPU's mask
  };
}

TEST_P(CudaBackendTest, AttentionPathsAgree) {
  const std::vector<PathCase> cases = PathCases();
  std::printf("%s\n", cuda::CudnnAttention::Versions().c_str());
  const CudaOps builtin(dtype(), /*synchronize_each_op=*/true, /*cudnn_attention=*/false);
  uint32_t seed = 1300;
  for (const PathCase& c : cases) {
    const AttentionShape& s = c.shape;
    const std::string name =
        AttentionName(s) + (c.dropout_p > 0 ? absl::StrCat(" dropout p=", c.dropout_p) : "");
    const CounterRng rng(78, StreamId("attention.dropout"));
    AttentionDropout dropout;
    if (c.dropout_p > 0) dropout = {&rng, c.dropout_p, 0, 0, s.heads()};
    const float scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
    const Shape qs{s.batch * s.seq, s.qkv_width()}, cs{s.batch * s.seq, s.heads() * s.head_dim};
    const Shape ls{s.batch, s.heads(), s.seq};
    const Values qkv = Act(qs[0] * qs[1], seed++, 1.5f);
    const Values dctx = Act(cs[0] * cs[1], seed++);

    Tensor probs, ctx = HostTensor(cs, Values(cs[0] * cs[1]));
    cpu().AttentionForward(s, HostTensor(qs, qkv), scale, dropout, &probs, &ctx);
    Tensor dqkv = HostTensor(qs, Values(qkv.size()));
    cpu().AttentionBackward(s, HostTensor(qs, qkv), probs, ctx, HostTensor(cs, dctx), scale,
                            dropout, &dqkv);
    const Values want_ctx = ValuesOf(ctx), want_dqkv = ValuesOf(dqkv);
    const Values want_lse = ReferenceLogSumExp(s, qkv, scale);

    const Tensor gqkv = Dev(qs, qkv), gdctx = Dev(cs, dctx);
    struct Run {
      const CudaOps* ops;
      Tensor saved, ctx;
      std::string forward_path;
    };
    Run runs[2] = {{&gpu(), {}, DevZeros(cs), ""}, {&builtin, {}, DevZeros(cs), ""}};
    for (Run& r : runs) {
      const int64_t before = r.ops->attention_path_counts().cudnn_forward;
      r.ops->AttentionForward(s, gqkv, scale, dropout, &r.saved, &r.ctx);
      r.forward_path = PathName(before, r.ops->attention_path_counts().cudnn_forward);
      const std::string what = absl::StrCat(name, " [", r.forward_path, "]");
      Check(Name("AttentionForward ctx", what), ValuesOf(r.ctx), want_ctx, attention_tol(),
            ContextLocator(s));
      Check(Name("AttentionForward saved", what), ValuesOf(r.saved), want_lse,
            kFp32AttentionTolerance, IndexIn(ls));
    }
    Check(Name("AttentionForward saved, cuDNN-enabled vs built-in", name), ValuesOf(runs[0].saved),
          ValuesOf(runs[1].saved), kFp32AttentionTolerance, IndexIn(ls));

    // Each backend's backward from each forward: (0, 0) and (1, 1) are the plain runs,
    // (0, 1) and (1, 0) cross the paths.
    std::string backward_path;
    for (const Run& from : runs) {
      for (const Run& by : runs) {
        Tensor got = DevZeros(qs);
        const int64_t before = by.ops->attention_path_counts().cudnn_backward;
        by.ops->AttentionBackward(s, gqkv, from.saved, from.ctx, gdctx, scale, dropout, &got);
        const std::string path = PathName(before, by.ops->attention_path_counts().cudnn_backward);
        if (by.ops == &gpu()) backward_path = path;
        EXPECT_TRUE(by.ops == &gpu() || path == "built-in")
            << "cudnn_attention = false still used cuDNN";
        Check(Name("AttentionBackward dqkv",
                   absl::StrCat(name, " [", path, " after a ", from.forward_path, " forward]")),
              ValuesOf(got), want_dqkv, attention_tol(), QkvLocator(s));
      }
    }

    const bool want_cudnn = c.cudnn && dtype() == DType::kBFloat16;
    const std::string want_path = want_cudnn ? "cuDNN" : "built-in";
    std::printf("[path] %s: forward %s, backward %s (expected %s)\n",
                Name("Attention", name).c_str(), runs[0].forward_path.c_str(),
                backward_path.c_str(), want_path.c_str());
    EXPECT_EQ(runs[0].forward_path, want_path)
        << name << ": forward took the wrong path (a cuDNN refusal is explained on stderr)";
    EXPECT_EQ(backward_path, want_path)
        << name << ": backward took the wrong path (a cuDNN refusal is explained on stderr)";
    EXPECT_EQ(runs[1].forward_path, "built-in") << "cudnn_attention = false still used cuDNN";
  }
}

// ---------------------------------------------------------------------------------------
// Embedding (vocabulary-parallel: this rank holds rows [vocab_start, vocab_start + rows)).

TEST_P(CudaBackendTest, Embedding) {
  struct Case {
    int64_t rows, width, vocab_start, count;
  };
  const std::vector<Case> cases = {{1, 1, 0, 1}, {50, 33, 100, 257}, {1000, 256, 3000, 4096}};
  uint32_t seed = 1100;
  for (const Case& c : cases) {
    const std::string shape = absl::StrCat("table [", c.rows, ", ", c.width,
                                           "] vocab_start=", c.vocab_start, " tokens=", c.count);
    // Ids in range (often repeated, so rows collect several tokens) and out of range on
    // both sides.
    std::mt19937 rng(seed++);
    std::uniform_int_distribution<int64_t> id(c.vocab_start - c.rows / 4 - 1,
                                              c.vocab_start + c.rows + c.rows / 4);
    std::vector<int32_t> ids(c.count);
    for (int32_t& v : ids) v = static_cast<int32_t>(std::max<int64_t>(0, id(rng)));
    const Shape table_shape{c.rows, c.width}, out_shape{c.count, c.width};
    for (const DType wdt : WeightDTypes()) {
      const Values table = Random(c.rows * c.width, seed++, wdt);
      Tensor want = HostTensor(out_shape, Values(c.count * c.width));
      cpu().EmbeddingForward(HostTensor(table_shape, table), c.vocab_start, ids, &want);
      Tensor got = DevZeros(out_shape);
      gpu().EmbeddingForward(DeviceTensor(table_shape, table, wdt), c.vocab_start, ids, &got);
      // A gather is exact, unless an fp32 table is rounded into bf16 activations.
      CheckTensor(Name("EmbeddingForward", shape + " table " + std::string(DTypeName(wdt))), got,
                  want, wdt == dtype() ? kExact : tol());
    }
    const Values dout = Act(c.count * c.width, seed++);
    const Values d0 = Random(c.rows * c.width, seed++, DType::kFloat32);
    Tensor want = HostTensor(table_shape, d0);
    cpu().EmbeddingBackwardWeight(HostTensor(out_shape, dout), c.vocab_start, ids, &want);
    Tensor got = DeviceTensor(table_shape, d0, DType::kFloat32);
    gpu().EmbeddingBackwardWeight(Dev(out_shape, dout), c.vocab_start, ids, &got);
    // Tokens are added in the CPU's order: bit-identical.
    CheckTensor(Name("EmbeddingBackwardWeight", shape), got, want, kExact);
  }
}

// ---------------------------------------------------------------------------------------
// Vocabulary-parallel cross-entropy: row max, sum of exponentials and target logit, and
// the gradient written over the logits.

TEST_P(CudaBackendTest, CrossEntropy) {
  struct Case {
    int64_t rows, vocab, vocab_start;
  };
  const std::vector<Case> cases = {{1, 1, 0}, {7, 50, 1000}, {64, 1000, 0}, {256, 50304, 50304}};
  uint32_t seed = 1200;
  for (const Case& c : cases) {
    const std::string shape =
        absl::StrCat("logits [", c.rows, ", ", c.vocab, "] vocab_start=", c.vocab_start);
    const Shape ls{c.rows, c.vocab};
    const Values logits = Act(c.rows * c.vocab, seed++, 3.0f);
    // Labels: every other row inside this rank's range, the rest outside (both sides).
    std::mt19937 rng(seed++);
    std::vector<int32_t> labels(c.rows);
    for (int64_t r = 0; r < c.rows; ++r) {
      const int64_t local = std::uniform_int_distribution<int64_t>(0, c.vocab - 1)(rng);
      const int64_t outside = (r % 4 == 1 && c.vocab_start > 0)
                                  ? c.vocab_start - 1 - local % c.vocab_start
                                  : c.vocab_start + c.vocab + local;
      labels[r] = static_cast<int32_t>(r % 2 == 0 ? c.vocab_start + local : outside);
    }
    const Tensor host = HostTensor(ls, logits);
    const Tensor dev = Dev(ls, logits);

    std::vector<double> max(c.rows), gmax(c.rows);
    cpu().RowMax(host, absl::MakeSpan(max));
    gpu().RowMax(dev, absl::MakeSpan(gmax));
    const auto as_floats = [](const std::vector<double>& v) { return Values(v.begin(), v.end()); };
    Check(Name("RowMax", shape), as_floats(gmax), as_floats(max), kExact, IndexIn({c.rows}));

    std::vector<double> sum(c.rows), target(c.rows), gsum(c.rows), gtarget(c.rows);
    cpu().SumExpAndTarget(host, labels, c.vocab_start, max, absl::MakeSpan(sum),
                          absl::MakeSpan(target));
    gpu().SumExpAndTarget(dev, labels, c.vocab_start, max, absl::MakeSpan(gsum),
                          absl::MakeSpan(gtarget));
    Check(Name("SumExpAndTarget sum_exp", shape), as_floats(gsum), as_floats(sum), kStatTolerance,
          IndexIn({c.rows}));
    Check(Name("SumExpAndTarget target", shape), as_floats(gtarget), as_floats(target), kExact,
          IndexIn({c.rows}));

    std::vector<float> lse(c.rows);
    for (int64_t r = 0; r < c.rows; ++r) lse[r] = static_cast<float>(max[r] + std::log(sum[r]));
    const float scale = 1.0f / static_cast<float>(c.rows);
    Tensor want = host.Clone(MemoryCategory::kOther);
    cpu().CrossEntropyBackward(labels, lse, c.vocab_start, scale, &want);
    Tensor got = dev.Clone(MemoryCategory::kOther);
    gpu().CrossEntropyBackward(labels, lse, c.vocab_start, scale, &got);
    CheckTensor(Name("CrossEntropyBackward dlogits", shape), got, want, tol());
  }
}

// ---------------------------------------------------------------------------------------
// The comparison itself (runs anywhere): NaN and Inf never pass, large errors fail.

TEST(CompareTest, NonFiniteValuesNeverPass) {
  const Values want = {1.0f, -2.0f, 3.0f, 0.5f};
  const Locator at = IndexIn({4});
  for (const float bad : {NAN, INFINITY, -INFINITY}) {
    Values got = want;
    got[2] = bad;
    const Comparison c = Compare(got, want, Tolerance{1e9, 1e9, 1e9}, at);  // any tolerance
    EXPECT_FALSE(c.ok) << bad;
    EXPECT_NE(c.failure.find("non-finite"), std::string::npos) << c.failure;
    EXPECT_NE(c.failure.find("[2]"), std::string::npos) << c.failure;
  }
}

TEST(CompareTest, ToleranceBoundsTheError) {
  const Values want = {1.0f, -2.0f, 3.0f, 0.5f};
  EXPECT_TRUE(Compare(want, want, kExact, IndexIn({4})).ok);
  Values close = want;
  close[1] = -2.01f;  // 0.5% off in one element
  EXPECT_TRUE(Compare(close, want, kBf16Tolerance, IndexIn({4})).ok);
  EXPECT_FALSE(Compare(close, want, kFp32Tolerance, IndexIn({4})).ok);
  Values far = want;
  far[3] = 0.6f;  // 20% off
  const Comparison c = Compare(far, want, kBf16Tolerance, IndexIn({2, 2}));
  EXPECT_FALSE(c.ok);
  EXPECT_NE(c.failure.find("[1, 1]"), std::string::npos) << c.failure;
}

// ---------------------------------------------------------------------------------------
// Host-side pieces of the backend (run anywhere).

// The cuDNN graphs of every shape the GPU test sends to cuDNN pass the frontend's checks
// (dims, strides, 16-byte alignment of the strided views of qkv) and cuDNN's own
// finalisation of the operation graph, for a Hopper GPU, without a device; a head_dim
// cuDNN cannot take is declined with a reason.
TEST(CudnnAttentionTest, GraphsValidateWithoutADevice) {
  std::printf("%s\n", cuda::CudnnAttention::Versions().c_str());
  for (const PathCase& c : PathCases()) {
    if (!c.cudnn) continue;
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.shape.head_dim));
    for (const bool forward : {true, false}) {
      const std::string why =
          cuda::CudnnAttention::CheckWithoutDevice(c.shape, scale, forward, /*sm_version=*/90);
      EXPECT_EQ(why, "") << (forward ? "forward " : "backward ") << AttentionName(c.shape);
    }
  }
  const AttentionShape odd_head_dim{1, 33, 2, 1, 12};
  const std::string why =
      cuda::CudnnAttention::CheckWithoutDevice(odd_head_dim, 0.25f, /*forward=*/true, 90);
  std::printf("head_dim 12 declined: %s\n", why.c_str());
  EXPECT_NE(why, "");
}

// The device Philox, run on the host, against CounterRng: the key read from the
// generator and the ten rounds must reproduce every draw, including indices >= 2^32.
TEST(PhiloxUniformTest, ReproducesCounterRngBitForBit) {
  for (const auto& [seed, stream] : std::vector<std::pair<uint64_t, uint64_t>>{
           {0, 0}, {1234, StreamId("dropout")}, {~0ull, MixStream(StreamId("x"), 99)}}) {
    const CounterRng rng(seed, stream);
    const cuda::PhiloxKey key = cuda::KeyOf(rng);
    EXPECT_EQ(key.seed, seed);
    EXPECT_EQ(key.stream, stream);
    for (uint64_t index = 0; index < 20000; ++index) {
      const uint64_t i = index < 10000 ? index : (uint64_t{1} << 32) - 5000 + index;
      ASSERT_EQ(cuda::PhiloxUniform(key, i), rng.Uniform(i)) << "seed " << seed << " index " << i;
    }
  }
}

// The embedding-gradient plan: occurring rows in order, each with its tokens in order,
// out-of-range ids left out.
TEST(EmbeddingGradPlanTest, GroupsTokensByRowInOrder) {
  const std::vector<int32_t> ids = {12, 10, 99, 12, 9, 11, 10, 12};  // rows [10, 13)
  const cuda::EmbeddingGradPlan plan = cuda::PlanEmbeddingGrad(ids.data(), 8, 10, 3);
  EXPECT_EQ(plan.num_rows, 3);
  // rows 0, 1, 2 | offsets 0, 2, 3, 6 | tokens (1, 6), (5), (0, 3, 7)
  EXPECT_EQ(plan.packed, (std::vector<int32_t>{0, 1, 2, 0, 2, 3, 6, 1, 6, 5, 0, 3, 7}));
  const cuda::EmbeddingGradPlan none = cuda::PlanEmbeddingGrad(ids.data(), 8, 1000, 3);
  EXPECT_EQ(none.num_rows, 0);
  EXPECT_EQ(none.packed, (std::vector<int32_t>{0}));
}

}  // namespace
}  // namespace conveyor
