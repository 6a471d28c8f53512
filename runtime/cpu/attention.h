// Causal scaled-dot-product attention with grouped-query heads, per sample and head:
//   S = scale * Q K^T,  S[i][j] = -inf for j > i (causal),  P = softmax_rows(S)
//   P' = dropout(P),    O = P' V
// Backward (dO given):
//   dP' = dO V^T,  dV = P'^T dO,  dP = dropout(dP'),  dS = P * (dP - rowsum(dP * P))
//   dQ = scale * dS K,  dK = scale * dS^T Q
// Heads sharing a key/value group add their dK and dV.
//
// The fused QKV row of one token follows Megatron's grouped layout: for each query
// group g, its `heads_per_group` query heads, then its key head, then its value head,
// each head_dim wide. A tensor-parallel rank holds whole groups, so it sees the same
// layout with fewer groups.
#ifndef CONVEYOR_RUNTIME_CPU_ATTENTION_H_
#define CONVEYOR_RUNTIME_CPU_ATTENTION_H_

#include <cstdint>

#include "runtime/op_params.h"

namespace conveyor::cpu {

// qkv: [batch * seq, qkv_width]; probs: [batch, heads, seq, seq] (P before dropout,
// kept for backward); ctx: [batch * seq, heads * head_dim].
void AttentionForward(const AttentionShape& shape, const float* qkv, float scale,
                      const AttentionDropout& dropout, float* probs, float* ctx);

// dqkv: [batch * seq, qkv_width], overwritten.
void AttentionBackward(const AttentionShape& shape, const float* qkv, const float* probs,
                       const float* dctx, float scale, const AttentionDropout& dropout,
                       float* dqkv);

}  // namespace conveyor::cpu

#endif  // CONVEYOR_RUNTIME_CPU_ATTENTION_H_
