// The CPU backend's one-pass bias-dropout-add (CpuOps::BiasDropoutAdd) against the
// formula written here element by element, y = residual + keep * (y + bias) / (1 - p)
// with keep = Uniform(first_index + i) >= p (runtime/ops.h), in the fp32 roundings of
// its three steps: bit for bit, with and without a bias, dropout 0 and not, rows whose
// width ends inside a vector block, and enough rows for several pool tasks.
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/cpu/cpu_ops.h"
#include "runtime/philox.h"
#include "runtime/tensor.h"

namespace conveyor {
namespace {

constexpr int64_t kRows = 300;
constexpr int64_t kWidth = 100;
constexpr uint64_t kFirstIndex = 12345;

Tensor Random(std::vector<int64_t> shape, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Tensor t = Tensor::Zeros(std::move(shape), MemoryCategory::kOther, DType::kFloat32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] = normal(gen);
  return t;
}

void Check(bool with_bias, float p) {
  const Tensor bias = Random({kWidth}, 1);
  const Tensor residual = Random({kRows, kWidth}, 2);
  const Tensor y0 = Random({kRows, kWidth}, 3);
  const CounterRng rng(42, 7);
  Tensor y = y0.Clone(MemoryCategory::kOther);
  CpuOps::Get().BiasDropoutAdd(with_bias ? &bias : nullptr, rng, p, kFirstIndex, residual, &y);
  int64_t dropped = 0;
  for (int64_t i = 0; i < kRows * kWidth; ++i) {
    float v = y0.data()[i];
    if (with_bias) v += bias.data()[i % kWidth];
    const bool keep = rng.Uniform(kFirstIndex + static_cast<uint64_t>(i)) >= p;
    dropped += keep ? 0 : 1;
    const float want = (keep ? v * (1.0f / (1.0f - p)) : 0.0f) + residual.data()[i];
    ASSERT_EQ(y.data()[i], want) << "element " << i << ", p = " << p << ", bias " << with_bias;
  }
  // The mask drops about p of the elements (30,000 draws: within 5 standard deviations).
  EXPECT_NEAR(static_cast<double>(dropped) / (kRows * kWidth), p, 0.014);
}

TEST(BiasDropoutAddTest, NoDropoutWithBias) { Check(true, 0.0f); }
TEST(BiasDropoutAddTest, NoDropoutWithoutBias) { Check(false, 0.0f); }
TEST(BiasDropoutAddTest, DropoutWithBias) { Check(true, 0.3f); }
TEST(BiasDropoutAddTest, DropoutWithoutBias) { Check(false, 0.3f); }

}  // namespace
}  // namespace conveyor
