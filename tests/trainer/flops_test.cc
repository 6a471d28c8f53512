#include "trainer/flops.h"

#include "gtest/gtest.h"

namespace conveyor {
namespace {

// GPT-2 124M at seq 1024, batch 1, by Megatron's formula worked out by hand:
// 12 * 1024 * 12 * 768^2 * ((1 + 1 + 1024/768) * 1 + 4 + 50304 / (2 * 12 * 768))
TEST(FlopsTest, Gpt2SmallMatchesMegatronFormula) {
  ModelShape s;
  s.num_layers = 12;
  s.hidden = 768;
  s.heads = 12;
  s.query_groups = 12;
  s.head_dim = 64;
  s.ffn_hidden = 3072;
  s.seq = 1024;
  s.padded_vocab = 50304;
  const double expected = 12.0 * 1024 * 12 * 768.0 * 768.0 *
                          ((2.0 + 1024.0 / 768.0) + 4.0 + 50304.0 / (2.0 * 12 * 768));
  EXPECT_NEAR(MegatronFlopsPerIteration(s, 1), expected, expected * 1e-12);
  EXPECT_NEAR(MegatronFlopsPerIteration(s, 8), 8 * expected, expected * 1e-11);
  // About 6 * 124M parameters * 1024 tokens plus attention: ~0.86 TFLOP.
  EXPECT_NEAR(expected / 1e12, 0.86, 0.02);
}

TEST(FlopsTest, GroupedQueryAndSwigluTerms) {
  ModelShape s;
  s.num_layers = 1;
  s.hidden = 8;
  s.heads = 4;
  s.query_groups = 1;
  s.head_dim = 2;
  s.ffn_hidden = 16;
  s.swiglu = true;
  s.seq = 8;
  s.padded_vocab = 16;
  const double expected = 12.0 * 8 * 1 * 64 * ((1 + 0.25 + 1.0) * 1.0 + 2.0 * 1.5 + 1.0);
  EXPECT_DOUBLE_EQ(MegatronFlopsPerIteration(s, 1), expected);
}

}  // namespace
}  // namespace conveyor
