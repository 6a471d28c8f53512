// --rotary-percent: RoPE on the first kv_channels * rotary_percent channels of each
// query and key head, the rest passed through, against Megatron's formula written out
// here in double: with R = rotary dims, inv_freq_i = base^(-2i / R) for i < R / 2, and
// channel i of the rotated part paired with channel i + R / 2 (rotate_half).
#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "model/model_shape.h"
#include "runtime/cpu/cpu_ops.h"
#include "runtime/op_params.h"
#include "runtime/tensor.h"

namespace conveyor {
namespace {

TEST(PartialRotaryTest, RotatesTheLeadingChannelsOnly) {
  ModelShape s;
  s.head_dim = 8;
  s.rotary_percent = 0.5f;
  s.seq = 5;
  const int64_t rotated = s.rotary_dims();
  ASSERT_EQ(rotated, 4);
  const double base = 10000.0;
  // One sample, two groups of two query heads (+ key + value head each).
  const AttentionShape shape{/*batch=*/1, s.seq, /*groups=*/2, /*heads_per_group=*/2, s.head_dim};
  Tensor qkv = Tensor::Zeros({s.seq, shape.qkv_width()}, MemoryCategory::kActivations);
  for (int64_t i = 0; i < qkv.numel(); ++i) qkv.data()[i] = std::sin(0.37 * double(i) + 0.1);
  const std::vector<float> before(qkv.data(), qkv.data() + qkv.numel());

  const RopeTable table(s.seq, rotated, static_cast<float>(base));
  std::vector<int32_t> positions(s.seq);
  for (int64_t p = 0; p < s.seq; ++p) positions[p] = static_cast<int32_t>(p);
  CpuOps::Get().RotateQueriesAndKeys(table, shape, positions, /*inverse=*/false, &qkv);

  const int64_t group_width = (shape.heads_per_group + 2) * s.head_dim;
  for (int64_t p = 0; p < s.seq; ++p) {
    for (int64_t g = 0; g < shape.groups; ++g) {
      for (int64_t h = 0; h < shape.heads_per_group + 2; ++h) {
        const int64_t head = p * shape.qkv_width() + g * group_width + h * s.head_dim;
        const bool value_head = h == shape.heads_per_group + 1;
        for (int64_t c = 0; c < s.head_dim; ++c) {
          double want = before[head + c];
          if (!value_head && c < rotated) {
            const int64_t i = c % (rotated / 2);
            const double angle = double(p) * std::pow(base, -2.0 * double(i) / double(rotated));
            const double x1 = before[head + i], x2 = before[head + i + rotated / 2];
            want = c < rotated / 2 ? x1 * std::cos(angle) - x2 * std::sin(angle)
                                   : x2 * std::cos(angle) + x1 * std::sin(angle);
          }
          EXPECT_NEAR(qkv.data()[head + c], want, 1e-6)
              << "position " << p << " group " << g << " head " << h << " channel " << c;
        }
      }
    }
  }
}

}  // namespace
}  // namespace conveyor
