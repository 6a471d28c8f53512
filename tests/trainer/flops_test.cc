#include "trainer/planning/flops.h"

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

// Multi-latent attention by Megatron's MLA branch, worked out by hand for hidden 8, 4
// heads, seq 8, a query latent of 3, a key/value latent of 2, heads of 2 + 2 rotated dims
// and values of 3 (multiply-adds per token and layer):
//   q: 3 * (8 + 4 * 4 + 1) = 75; kv: 2 * (8 + 4 * (2 + 3) + 1) + 8 * 2 = 74;
//   o: 4 * 3 * 8 = 96; core: 8 * 4 * (4 + 3) / 2 = 112; total 357
// so FLOPs = 6 * 8 tokens * (357 + the MLP's 2 * 8 * 16 + the logits' 8 * 16).
TEST(FlopsTest, MultiLatentAttentionIsMegatronsMlaBranch) {
  ModelShape s;
  s.num_layers = 1;
  s.hidden = 8;
  s.heads = 4;
  s.ffn_hidden = 16;
  s.seq = 8;
  s.padded_vocab = 16;
  s.UseMla({/*enabled=*/true, /*q_lora_rank=*/3, /*kv_lora_rank=*/2, /*qk_head_dim=*/2,
            /*qk_pos_emb_head_dim=*/2, /*v_head_dim=*/3});
  const double expected = 6.0 * 8 * (357.0 + 2.0 * 8 * 16 + 8.0 * 16);
  EXPECT_DOUBLE_EQ(MegatronFlopsPerIteration(s, 1), expected);
}

// Megatron counts an MoE layer's active experts (topk x the expert MLP, plus the shared
// expert) and dense layers' MLP: two layers, one MoE (top-2 of 8 experts of width 6 and
// a shared expert of width 4), one dense of width 16, by hand:
//   12 * 8 * 2 * 64 * (attention + ((2 * 6 + 4) + 16) / (2 * 8) + logits)
TEST(FlopsTest, MixtureOfExpertsCountsActiveExperts) {
  ModelShape s;
  s.num_layers = 2;
  s.hidden = 8;
  s.heads = 4;
  s.query_groups = 4;
  s.head_dim = 2;
  s.ffn_hidden = 16;
  s.seq = 8;
  s.padded_vocab = 32;
  s.moe.router.experts = 8;
  s.moe.router.topk = 2;
  s.moe.ffn_hidden = 6;
  s.moe.shared_expert_ffn = 4;
  s.moe.layers = {true, false};
  const double expected =
      12.0 * 8 * 2 * 64 * ((1 + 1 + 1.0) * 1.0 + 32.0 / 16 + 32.0 / (2 * 2 * 8));
  EXPECT_DOUBLE_EQ(MegatronFlopsPerIteration(s, 1), expected);
}

}  // namespace
}  // namespace conveyor
