// The mixture-of-experts token ops of the CPU backend on a hand-worked example, and the
// emulated bf16 backend's as the fp32 results rounded once.
#include <vector>

#include "gtest/gtest.h"
#include "runtime/bf16_emulation_ops.h"
#include "runtime/cpu/cpu_ops.h"

namespace conveyor {
namespace {

Tensor Matrix(int64_t rows, int64_t columns, const std::vector<float>& values) {
  Tensor t = Tensor::Zeros({rows, columns}, MemoryCategory::kActivations);
  std::copy(values.begin(), values.end(), t.data());
  return t;
}

std::vector<float> Values(const Tensor& t) { return {t.data(), t.data() + t.numel()}; }

// Three tokens of width 2, top-2: token 0 -> rows 2 and 0, token 1 -> row 1 and dropped,
// token 2 -> rows 3 and 4; row 5 pads.
const std::vector<int32_t> kTokenOfRow = {0, 1, 0, 2, 2, -1};
const std::vector<int32_t> kRowOfSlot = {2, 0, 1, -1, 3, 4};

TEST(MoeTokensTest, PermuteGathersRowsWithWeightsAndZeroPadding) {
  const Tensor x = Matrix(3, 2, {1, 2, 3, 4, 5, 6});
  Tensor out = Tensor::Zeros({6, 2}, MemoryCategory::kActivations);
  CpuOps::Get().PermuteTokens(x, kTokenOfRow, {}, &out);
  EXPECT_EQ(Values(out), (std::vector<float>{1, 2, 3, 4, 1, 2, 5, 6, 5, 6, 0, 0}));
  CpuOps::Get().PermuteTokens(x, kTokenOfRow, std::vector<float>{1, 2, 3, 4, 5, 6}, &out);
  EXPECT_EQ(Values(out), (std::vector<float>{1, 2, 6, 8, 3, 6, 20, 24, 25, 30, 0, 0}));
}

TEST(MoeTokensTest, UnpermuteSumsEachTokensSlotsWeighted) {
  const Tensor permuted = Matrix(6, 2, {1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 9, 9});
  Tensor out = Tensor::Zeros({3, 2}, MemoryCategory::kActivations);
  // token 0: 0.5 * row 2 + 0.25 * row 0; token 1: 2 * row 1; token 2: row 3 - row 4.
  CpuOps::Get().UnpermuteTokens(permuted, kRowOfSlot, std::vector<float>{0.5f, 0.25f, 2, 7, 1, -1},
                                &out);
  EXPECT_EQ(Values(out), (std::vector<float>{1.75f, 1.75f, 4, 4, -1, -1}));
  CpuOps::Get().UnpermuteTokens(permuted, kRowOfSlot, {}, &out);
  EXPECT_EQ(Values(out), (std::vector<float>{4, 4, 2, 2, 9, 9}));
}

TEST(MoeTokensTest, SlotDotsAreZeroForDroppedSlots) {
  const Tensor dy = Matrix(3, 2, {1, -1, 2, 0, 0.5f, 0.5f});
  const Tensor permuted = Matrix(6, 2, {1, 3, 2, 5, 4, 1, 4, 4, 6, 2, 9, 9});
  std::vector<float> dots(6, 99.0f);
  CpuOps::Get().SlotDots(dy, permuted, kRowOfSlot, absl::MakeSpan(dots));
  EXPECT_EQ(dots, (std::vector<float>{3, -2, 4, 0, 4, 4}));
}

TEST(MoeTokensTest, EmulatedBf16RoundsTheFp32Result) {
  const Bf16EmulationOps bf16(&CpuOps::Get());
  const Tensor x32 = Matrix(3, 2, {1.001f, 2.002f, 3.003f, 4.004f, 5.005f, 6.006f});
  const Tensor x = bf16.CastTo(x32, DType::kBFloat16);
  Tensor out = bf16.NewActivation({3, 2});
  const std::vector<float> weights = {0.3f, 0.7f, 1.1f, 0, 0.9f, 0.1f};
  bf16.UnpermuteTokens(x, std::vector<int32_t>{0, 1, 2, -1, 2, 1}, weights, &out);
  // The reference: fp32 on the bf16 inputs, rounded once.
  Tensor x_wide = Tensor::Zeros({3, 2}, MemoryCategory::kActivations);
  CpuOps::Get().Cast(x, &x_wide);
  Tensor expected = Tensor::Zeros({3, 2}, MemoryCategory::kActivations);
  CpuOps::Get().UnpermuteTokens(x_wide, std::vector<int32_t>{0, 1, 2, -1, 2, 1}, weights,
                                &expected);
  Tensor expected_bf16 = bf16.CastTo(expected, DType::kBFloat16);
  Tensor got = Tensor::Zeros({3, 2}, MemoryCategory::kActivations);
  Tensor want = Tensor::Zeros({3, 2}, MemoryCategory::kActivations);
  CpuOps::Get().Cast(out, &got);
  CpuOps::Get().Cast(expected_bf16, &want);
  EXPECT_EQ(Values(got), Values(want));
}

}  // namespace
}  // namespace conveyor
