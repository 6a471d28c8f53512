// The CPU cross-entropy ops against float64 formulas written here: the row max, the sum
// of exponentials and the target logit read in one pass (also split across two
// "ranks" of vocabulary columns, combined as the model combines them), and the gradient
// written over the logits. Rows are wider than one online block and have their max in a
// late block, so the running sum is rescaled.
#include "runtime/cpu/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace conveyor::cpu {
namespace {

constexpr int64_t kRows = 6;
constexpr int64_t kVocab = 5003;  // several online blocks and a ragged end

struct Logits {
  std::vector<float> z;
  std::vector<int32_t> labels;
};

Logits MakeLogits() {
  std::mt19937 gen(7);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  Logits l;
  for (int64_t i = 0; i < kRows * kVocab; ++i) l.z.push_back(normal(gen));
  for (int64_t r = 0; r < kRows; ++r) {
    l.z[r * kVocab + kVocab - 7 - r] = 40.0f + r;  // the max in the last block
    l.labels.push_back(static_cast<int32_t>((r * 977) % kVocab));
  }
  return l;
}

double Max64(const float* z, int64_t n) { return *std::max_element(z, z + n); }

double SumExp64(const float* z, int64_t n, double max) {
  double s = 0.0;
  for (int64_t v = 0; v < n; ++v) s += std::exp(static_cast<double>(z[v]) - max);
  return s;
}

TEST(CrossEntropyTest, OnePassStatisticsMatchFloat64) {
  const Logits l = MakeLogits();
  std::vector<double> max(kRows), sum(kRows), target(kRows);
  RowMaxSumExpAndTarget(l.z.data(), l.labels.data(), kRows, kVocab, 0, max.data(), sum.data(),
                        target.data());
  for (int64_t r = 0; r < kRows; ++r) {
    const float* z = l.z.data() + r * kVocab;
    EXPECT_EQ(max[r], Max64(z, kVocab));
    EXPECT_NEAR(sum[r], SumExp64(z, kVocab, max[r]), 1e-6 * sum[r]) << "row " << r;
    EXPECT_EQ(target[r], z[l.labels[r]]);
  }
}

TEST(CrossEntropyTest, VocabularySplitCombinesToTheWholeRow) {
  const Logits l = MakeLogits();
  const int64_t half = kVocab / 2;
  // Each "rank" holds a column range of its own copy of the logits.
  std::vector<double> m[2], s[2], t[2];
  for (int rank = 0; rank < 2; ++rank) {
    const int64_t start = rank * half, width = rank == 0 ? half : kVocab - half;
    std::vector<float> part;
    for (int64_t r = 0; r < kRows; ++r) {
      part.insert(part.end(), l.z.begin() + r * kVocab + start,
                  l.z.begin() + r * kVocab + start + width);
    }
    m[rank].resize(kRows), s[rank].resize(kRows), t[rank].resize(kRows);
    RowMaxSumExpAndTarget(part.data(), l.labels.data(), kRows, width, start, m[rank].data(),
                          s[rank].data(), t[rank].data());
  }
  for (int64_t r = 0; r < kRows; ++r) {
    const float* z = l.z.data() + r * kVocab;
    const double global = std::max(m[0][r], m[1][r]);
    const double sum = s[0][r] * std::exp(m[0][r] - global) + s[1][r] * std::exp(m[1][r] - global);
    const double want_max = Max64(z, kVocab);
    EXPECT_NEAR(global + std::log(sum), want_max + std::log(SumExp64(z, kVocab, want_max)), 1e-6);
    EXPECT_EQ(t[0][r] + t[1][r], z[l.labels[r]]);  // the other rank contributes 0
  }
}

TEST(CrossEntropyTest, SumExpWithAGivenMaxMatchesFloat64) {
  const Logits l = MakeLogits();
  std::vector<double> max(kRows), sum(kRows), target(kRows);
  RowMax(l.z.data(), kRows, kVocab, max.data());
  SumExpAndTarget(l.z.data(), l.labels.data(), kRows, kVocab, 0, max.data(), sum.data(),
                  target.data());
  for (int64_t r = 0; r < kRows; ++r) {
    const float* z = l.z.data() + r * kVocab;
    EXPECT_EQ(max[r], Max64(z, kVocab));
    EXPECT_NEAR(sum[r], SumExp64(z, kVocab, max[r]), 1e-6 * sum[r]);
    EXPECT_EQ(target[r], z[l.labels[r]]);
  }
}

TEST(CrossEntropyTest, GradientIsScaledSoftmaxMinusOneHot) {
  const Logits l = MakeLogits();
  std::vector<float> lse(kRows), mask(kRows);
  for (int64_t r = 0; r < kRows; ++r) {
    const float* z = l.z.data() + r * kVocab;
    const double max = Max64(z, kVocab);
    lse[r] = static_cast<float>(max + std::log(SumExp64(z, kVocab, max)));
    mask[r] = r == 2 ? 0.0f : 1.0f;
  }
  std::vector<float> grad = l.z;
  const float scale = 0.25f;
  CrossEntropyBackward(l.labels.data(), lse.data(), kRows, kVocab, 0, scale, mask.data(),
                       grad.data());
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t v = 0; v < kVocab; ++v) {
      const double p = std::exp(static_cast<double>(l.z[r * kVocab + v]) - lse[r]);
      const double want = scale * mask[r] * (p - (v == l.labels[r] ? 1.0 : 0.0));
      ASSERT_NEAR(grad[r * kVocab + v], want, 1e-6 * std::fabs(want) + 1e-9)
          << "row " << r << " column " << v;
    }
  }
}

}  // namespace
}  // namespace conveyor::cpu
