// Causal scaled-dot-product attention with grouped-query heads, per sample and head,
// computed block by block over the keys (FlashAttention's online softmax, Dao et al.
// 2022; Liu et al. 2023's ring attention passes the blocks between ranks):
//   S = scale * Q K^T,  S[i][j] = -inf unless key j is visible to query i (AttentionMask)
//   P = exp(S - lse),   lse[i] = log sum_j exp(S[i][j])
//   P' = dropout(P),    O = P' V
// A block of keys gives its own (O_b, lse_b); merged into the running result by
//   lse = log(exp(lse_a) + exp(lse_b)),  O = exp(lse_a - lse) O_a + exp(lse_b - lse) O_b,
// which is exact, so any split of the keys into blocks gives the one-block result up to
// rounding. Backward (dO given), per block with the final lse, D = rowsum(dO * O) (for
// the whole sample in one block, the equal rowsum(P' * dP'), without reading O):
//   dP' = dO V^T,  dV = P'^T dO,  dP = dropout(dP'),  dS = P * (dP - D)
//   dQ = scale * dS K,  dK = scale * dS^T Q
// Heads sharing a key/value group add their dK and dV.
//
// The fused QKV row of one token follows Megatron's grouped layout: for each query
// group g, its `heads_per_group` query heads, then its key head, each head_dim wide,
// then its value head, value_dim() wide (op_params.h). A tensor-parallel rank holds whole
// groups, so it sees the same layout with fewer groups. A block's keys and values come
// packed: per group, its key head then its value head (PackKeysValues).
#ifndef CONVEYOR_RUNTIME_CPU_ATTENTION_H_
#define CONVEYOR_RUNTIME_CPU_ATTENTION_H_

#include <cstdint>

#include "runtime/attention_mask.h"
#include "runtime/op_params.h"

namespace conveyor::cpu {

// kv [batch * seq, kv_width()] = the key and value heads of qkv's rows.
void PackKeysValues(const AttentionShape& shape, const float* qkv, float* kv);
// The key and value heads of dqkv += dkv (PackKeysValues' layout).
void AddKeyValueGrad(const AttentionShape& shape, const float* dkv, float* dqkv);

// The query rows of qkv ([batch * seq, qkv_width]) against a block of `key_rows` keys
// per sample, kv [batch * key_rows, kv_width()], merged into ctx [batch * seq,
// context_width()] (normalised over the keys seen so far) and lse fp32 [batch,
// heads, seq]. `first`: ctx and lse hold nothing yet and are overwritten. A row that has
// seen no visible key has ctx 0 and lse -inf.
void AttentionBlockForward(const AttentionShape& shape, int64_t key_rows, const AttentionMask& mask,
                           const float* qkv, const float* kv, float scale,
                           const AttentionDropout& dropout, bool first, float* ctx, float* lse);

// The block's share of the gradients, from the final ctx and lse: the query heads of
// dqkv += dQ, dkv += (dK, dV).
void AttentionBlockBackward(const AttentionShape& shape, int64_t key_rows,
                            const AttentionMask& mask, const float* qkv, const float* kv,
                            const float* ctx, const float* lse, const float* dctx, float scale,
                            const AttentionDropout& dropout, float* dqkv, float* dkv);

// The whole sample held here, one block: the rows' own keys (mask positions empty).
// lse: [batch, heads, seq], what backward needs besides qkv and ctx.
void AttentionForward(const AttentionShape& shape, const AttentionMask& mask, const float* qkv,
                      float scale, const AttentionDropout& dropout, float* lse, float* ctx);
// dqkv: [batch * seq, qkv_width], overwritten.
void AttentionBackward(const AttentionShape& shape, const AttentionMask& mask, const float* qkv,
                       const float* lse, const float* ctx, const float* dctx, float scale,
                       const AttentionDropout& dropout, float* dqkv);

}  // namespace conveyor::cpu

#endif  // CONVEYOR_RUNTIME_CPU_ATTENTION_H_
