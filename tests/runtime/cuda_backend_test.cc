// The CUDA backend (CudaOps) against the CPU reference (CpuOps), op by op, forward and
// backward, on fresh random inputs with fixed seeds, in fp32 and bf16
// (tests/runtime/cuda_backend_testing.h); attention is in cuda_attention_test.cc.
// Needs a GPU; on a CPU-only machine the GPU tests skip with the reason, and only the
// host-side pieces run (the comparison's self-test, the device Philox's host twin, the
// embedding-gradient plan).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/cuda/embedding_kernels.h"
#include "runtime/cuda/philox_uniform.h"
#include "runtime/op_params.h"
#include "runtime/philox.h"
#include "tests/runtime/cuda_backend_testing.h"

namespace conveyor::testing_util {
namespace {

INSTANTIATE_TEST_SUITE_P(ComputeDType, CudaBackendTest,
                         ::testing::Values(DType::kFloat32, DType::kBFloat16),
                         [](const ::testing::TestParamInfo<DType>& test) {
                           return std::string(DTypeName(test.param));
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
// Linear layers: bias, GELU and bias gradient in cuBLASLt's epilogues, against the CPU's
// Gemm + bias + GELU kernels.

struct LinearCase {
  int64_t rows, in, out;
  bool bias;
  bool must_fuse;  // aligned and layer-sized: cuBLASLt must take every epilogue
};

TEST_P(CudaBackendTest, LinearLayerEpilogues) {
  const std::vector<LinearCase> cases = {
      {1, 1, 1, true, false},       {37, 29, 53, true, false},
      {37, 29, 53, false, false},   {512, 768, 2304, true, true},  // GPT-2's qkv
      {512, 3072, 768, true, true},                                // GPT-2's fc2
      {130, 257, 33, true, false},                                 // odd: may be composed
  };
  uint32_t seed = 150;
  for (const LinearCase& c : cases) {
    const int64_t declined_before = gpu().gemm_declined_epilogues();
    const Values x = Act(c.rows * c.in, seed++), w = Act(c.out * c.in, seed++);
    const Values bias = Random(c.out, seed++, DType::kFloat32);
    const std::string shape =
        absl::StrCat("rows=", c.rows, " in=", c.in, " out=", c.out, c.bias ? " bias" : "");
    const Tensor host_bias = HostTensor({c.out}, bias);
    const Tensor dev_bias = DeviceTensor({c.out}, bias, DType::kFloat32);
    Tensor want = Tensor::Zeros({c.rows, c.out}, MemoryCategory::kOther);
    cpu().LinearForward(HostTensor({c.rows, c.in}, x), HostTensor({c.out, c.in}, w),
                        c.bias ? &host_bias : nullptr, &want);
    Tensor got = DevZeros({c.rows, c.out});
    gpu().LinearForward(Dev({c.rows, c.in}, x), Dev({c.out, c.in}, w), c.bias ? &dev_bias : nullptr,
                        &got);
    // bf16: the epilogue rounds the bias, then the sum (the CPU rounds only the sum).
    CheckTensor(Name("LinearForward", shape), got, want, tol());

    Tensor want_pre = Tensor::Zeros({c.rows, c.out}, MemoryCategory::kOther);
    Tensor want_act = Tensor::Zeros({c.rows, c.out}, MemoryCategory::kOther);
    cpu().LinearGeluForward(HostTensor({c.rows, c.in}, x), HostTensor({c.out, c.in}, w),
                            c.bias ? &host_bias : nullptr, &want_pre, &want_act);
    Tensor got_pre = DevZeros({c.rows, c.out}), got_act = DevZeros({c.rows, c.out});
    gpu().LinearGeluForward(Dev({c.rows, c.in}, x), Dev({c.out, c.in}, w),
                            c.bias ? &dev_bias : nullptr, &got_pre, &got_act);
    CheckTensor(Name("LinearGeluForward pre", shape), got_pre, want_pre, tol());
    // cuBLASLt evaluates GELU's tanh its own way (and, in bf16, on the unrounded sum).
    const Tolerance gelu = dtype() == DType::kFloat32 ? kFp32AttentionTolerance : tol();
    CheckTensor(Name("LinearGeluForward act", shape), got_act, want_act, gelu);

    // Back through the GELU: fc2's input gradient with GELU's derivative at `pre` (here
    // the layer's shape read the other way round: dy [rows, out] times w [out, in]).
    const Values pre = Act(c.rows * c.in, seed++), dy_out = Act(c.rows * c.out, seed++);
    Tensor want_dx = Tensor::Zeros({c.rows, c.in}, MemoryCategory::kOther);
    cpu().LinearGeluBackwardInput(HostTensor({c.rows, c.out}, dy_out), HostTensor({c.out, c.in}, w),
                                  HostTensor({c.rows, c.in}, pre), &want_dx);
    Tensor got_dx = DevZeros({c.rows, c.in});
    gpu().LinearGeluBackwardInput(Dev({c.rows, c.out}, dy_out), Dev({c.out, c.in}, w),
                                  Dev({c.rows, c.in}, pre), &got_dx);
    CheckTensor(Name("LinearGeluBackwardInput", shape), got_dx, want_dx, gelu);

    const Values dy = Act(c.rows * c.out, seed++);
    const Values dw0 = Random(c.out * c.in, seed++, DType::kFloat32);
    const Values db0 = Random(c.out, seed++, DType::kFloat32);
    Tensor want_dw = HostTensor({c.out, c.in}, dw0), want_db = HostTensor({c.out}, db0);
    cpu().LinearWeightGrad(HostTensor({c.rows, c.in}, x), HostTensor({c.rows, c.out}, dy), &want_dw,
                           c.bias ? &want_db : nullptr);
    Tensor got_dw = DeviceTensor({c.out, c.in}, dw0, DType::kFloat32);
    Tensor got_db = DeviceTensor({c.out}, db0, DType::kFloat32);
    gpu().LinearWeightGrad(Dev({c.rows, c.in}, x), Dev({c.rows, c.out}, dy), &got_dw,
                           c.bias ? &got_db : nullptr);
    const Tolerance accumulated =
        dtype() == DType::kBFloat16 ? kFp32AttentionTolerance : kFp32Tolerance;  // as Gemm's
    CheckTensor(Name("LinearWeightGrad dw", shape), got_dw, want_dw, accumulated);
    CheckTensor(Name("LinearWeightGrad dbias", shape), got_db, want_db, accumulated);
    const int64_t declined = gpu().gemm_declined_epilogues() - declined_before;
    std::printf("Linear %s: cuBLASLt declined %lld of its epilogues\n", shape.c_str(),
                static_cast<long long>(declined));
    // Otherwise the fusion would exist only on paper for the shapes that matter. Only in
    // bf16, the type training runs in: cuBLASLt does not promise fp32 epilogue kernels.
    if (c.must_fuse && dtype() == DType::kBFloat16) {
      EXPECT_EQ(declined, 0) << shape;
    }
  }
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

// --qk-layernorm's moves of query and key heads: columns [3, 3 + 5) of a [7, 12]
// matrix into columns [2, 2 + 5) of a [7, 9] one, over the destination's other values.
TEST_P(CudaBackendTest, CopyColumnsIsACopy) {
  const Shape from = {7, 12}, to = {7, 9};
  const Values src = Act(7 * 12, 350), dst = Act(7 * 9, 351);
  Tensor want = HostTensor(to, dst);
  cpu().CopyColumns(HostTensor(from, src), 3, 5, &want, 2);
  Tensor got = Dev(to, dst);
  gpu().CopyColumns(Dev(from, src), 3, 5, &got, 2);
  CheckTensor(Name("CopyColumns", ShapeName(to)), got, want, kExact);
}

// Mixture of experts' token movement: 6 tokens of width 40, top-2 over 3 experts with one
// slot dropped and two padding rows; weighted and unweighted; the slots' dot products.
TEST_P(CudaBackendTest, MoeTokenPermutation) {
  const int64_t tokens = 6, topk = 2, width = 40, rows = 13;
  const std::vector<int32_t> token_of_row = {0, 2, 3, 5, -1, 1, 1, 4, 0, 2, 3, 5, -1};
  std::vector<int32_t> row_of_slot(tokens * topk, -1);
  std::vector<int32_t> slot_of_row;
  std::vector<int> next(tokens, 0);
  for (int32_t r = 0; r < rows; ++r) {
    if (token_of_row[r] < 0) continue;
    const int32_t t = token_of_row[r];
    row_of_slot[t * topk + next[t]++] = r;
  }
  row_of_slot[4 * topk + 1] = -1;  // token 4 keeps one slot: the other was dropped
  const Values x = Act(tokens * width, 380), permuted = Act(rows * width, 381);
  const Values dy = Act(tokens * width, 382);
  const std::vector<float> row_weight = {0.5f, 1, 0.25f, 2, 0, 0.75f, 1.5f, 1, 0.1f, 3, 1, 1, 0};
  const std::vector<float> slot_weight = {0.6f, 0.4f, 0.9f, 0.1f, 0.5f, 0.5f,
                                          1,    0,    0.3f, 0.7f, 0.2f, 0.8f};
  for (const bool weighted : {false, true}) {
    const std::string how = weighted ? "weighted" : "unweighted";
    Tensor want = HostTensor({rows, width}, Values(rows * width, 0.0f));
    cpu().PermuteTokens(HostTensor({tokens, width}, x), token_of_row,
                        weighted ? row_weight : std::vector<float>{}, &want);
    Tensor got = DevZeros({rows, width});
    gpu().PermuteTokens(Dev({tokens, width}, x), token_of_row,
                        weighted ? row_weight : std::vector<float>{}, &got);
    CheckTensor(Name("PermuteTokens", how), got, want, tol());
    Tensor want_out = HostTensor({tokens, width}, Values(tokens * width, 0.0f));
    cpu().UnpermuteTokens(HostTensor({rows, width}, permuted), row_of_slot,
                          weighted ? slot_weight : std::vector<float>{}, &want_out);
    Tensor got_out = DevZeros({tokens, width});
    gpu().UnpermuteTokens(Dev({rows, width}, permuted), row_of_slot,
                          weighted ? slot_weight : std::vector<float>{}, &got_out);
    CheckTensor(Name("UnpermuteTokens", how), got_out, want_out, tol());
  }
  Values want_dots(tokens * topk), got_dots(tokens * topk);
  cpu().SlotDots(HostTensor({tokens, width}, dy), HostTensor({rows, width}, permuted), row_of_slot,
                 absl::MakeSpan(want_dots));
  gpu().SlotDots(Dev({tokens, width}, dy), Dev({rows, width}, permuted), row_of_slot,
                 absl::MakeSpan(got_dots));
  Check(Name("SlotDots", ShapeName({tokens, topk})), got_dots, want_dots, kStatTolerance,
        IndexIn({tokens, topk}));
}

struct PositionCase {
  int64_t rows, width, seq, first_row;
};

// Row r's position: (first_row + 3 r) mod seq, so rows meet positions out of order and
// repeat them (as reset positions do).
std::vector<int32_t> CasePositions(const PositionCase& c) {
  std::vector<int32_t> positions(c.rows);
  for (int64_t r = 0; r < c.rows; ++r) {
    positions[r] = static_cast<int32_t>((c.first_row + 3 * r) % c.seq);
  }
  return positions;
}

TEST_P(CudaBackendTest, PositionRowsAndGrad) {
  const std::vector<PositionCase> cases = {
      {1, 8, 1, 0}, {12, 24, 5, 3}, {128, 33, 64, 0}, {100, 64, 64, 70}, {2048, 256, 1024, 0}};
  uint32_t seed = 400;
  for (const PositionCase& c : cases) {
    const std::string shape = absl::StrCat("rows=", c.rows, " width=", c.width, " seq=", c.seq,
                                           " first_row=", c.first_row);
    const Shape x_shape{c.rows, c.width}, table_shape{c.seq, c.width};
    const std::vector<int32_t> positions = CasePositions(c);
    for (const DType wdt : WeightDTypes()) {
      const Values x = Act(c.rows * c.width, seed++);
      const Values table = Random(c.seq * c.width, seed++, wdt);
      Tensor want = HostTensor(x_shape, x);
      cpu().AddPositionRows(HostTensor(table_shape, table), positions, &want);
      Tensor got = Dev(x_shape, x);
      gpu().AddPositionRows(DeviceTensor(table_shape, table, wdt), positions, &got);
      CheckTensor(Name("AddPositionRows", shape + " table " + std::string(DTypeName(wdt))), got,
                  want, tol());
    }
    const Values dx = Act(c.rows * c.width, seed++);
    const Values d0 = Random(c.seq * c.width, seed++, DType::kFloat32);
    Tensor want = HostTensor(table_shape, d0);
    cpu().AccumulatePositionGrad(HostTensor(x_shape, dx), positions, &want);
    Tensor got = DeviceTensor(table_shape, d0, DType::kFloat32);
    gpu().AccumulatePositionGrad(Dev(x_shape, dx), positions, &got);
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
    // {1000, 96}: the weight gradients' column sums split into row chunks of unequal size.
    for (const Shape& s :
         std::vector<Shape>{{1, 8}, {5, 33}, {64, 1000}, {1000, 96}, {2048, 4096}}) {
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

TEST_P(CudaBackendTest, SquaredRelu) {
  uint32_t seed = 650;
  for (const int64_t n : {1, 1000, 65537, 1 << 22}) {
    const Shape s{n};
    const Values x = Act(n, seed++, 3.0f), dy = Act(n, seed++);
    Tensor y = HostTensor(s, Values(n)), dx = HostTensor(s, Values(n));
    cpu().SquaredReluForward(HostTensor(s, x), &y);
    cpu().SquaredReluBackward(HostTensor(s, x), HostTensor(s, dy), &dx);
    Tensor gy = DevZeros(s), gdx = DevZeros(s);
    gpu().SquaredReluForward(Dev(s, x), &gy);
    gpu().SquaredReluBackward(Dev(s, x), Dev(s, dy), &gdx);
    CheckTensor(Name("SquaredReluForward", ShapeName(s)), gy, y, tol());
    CheckTensor(Name("SquaredReluBackward", ShapeName(s)), gdx, dx, tol());
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

TEST_P(CudaBackendTest, BiasDropoutAddIsTheComposition) {
  const CounterRng rng(0x0fedcba987654321ull, MixStream(StreamId("layers.1.attention.out"), 3));
  struct Case {
    int64_t rows, width;
    float p;
    uint64_t first_index;
    bool bias;
  };
  const std::vector<Case> cases = {{1, 1, 0.1f, 0, true},
                                   {7, 33, 0.1f, 12345678901ull, true},  // index > 2^32
                                   {300, 1000, 0.0f, 5, true},           // no dropout
                                   {512, 768, 0.1f, 99, false},          // no bias
                                   {4096, 1024, 0.5f, 3, true}};
  uint32_t seed = 850;
  for (const Case& c : cases) {
    for (const DType wdt : WeightDTypes()) {
      const Shape shape{c.rows, c.width};
      const std::string name =
          Name("BiasDropoutAdd",
               absl::StrCat(ShapeName(shape), " p=", c.p, " first_index=", c.first_index,
                            c.bias ? " bias " : " no bias ", DTypeName(wdt)));
      const Values y = Act(c.rows * c.width, seed++), residual = Act(c.rows * c.width, seed++);
      const Values bias = Random(c.width, seed++, wdt);
      const Tensor host_bias = HostTensor({c.width}, bias);
      Tensor want = HostTensor(shape, y);
      cpu().BiasDropoutAdd(c.bias ? &host_bias : nullptr, rng, c.p, c.first_index,
                           HostTensor(shape, residual), &want);
      const Tensor dev_bias = DeviceTensor({c.width}, bias, wdt);
      Tensor got = Dev(shape, y);
      gpu().BiasDropoutAdd(c.bias ? &dev_bias : nullptr, rng, c.p, c.first_index,
                           Dev(shape, residual), &got);
      // fp32: the composition's operations in its order, so bit for bit; bf16: one
      // rounding where the composition has three.
      CheckTensor(name, got, want, dtype() == DType::kFloat32 ? kExact : tol());
    }
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
    // Every third row masked, as --eod-mask-loss masks eod inputs.
    std::vector<float> loss_mask(c.rows);
    for (int64_t r = 0; r < c.rows; ++r) loss_mask[r] = r % 3 == 1 ? 0.0f : 1.0f;
    for (const bool masked : {false, true}) {
      const absl::Span<const float> mask =
          masked ? absl::MakeConstSpan(loss_mask) : absl::Span<const float>();
      Tensor want = host.Clone(MemoryCategory::kOther);
      cpu().CrossEntropyBackward(labels, lse, c.vocab_start, scale, mask, &want);
      Tensor got = dev.Clone(MemoryCategory::kOther);
      gpu().CrossEntropyBackward(labels, lse, c.vocab_start, scale, mask, &got);
      const char* what =
          masked ? "CrossEntropyBackward masked dlogits" : "CrossEntropyBackward dlogits";
      CheckTensor(Name(what, shape), got, want, tol());
    }
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
}  // namespace conveyor::testing_util
