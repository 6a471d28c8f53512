// Causal grouped-query attention on the device, flash-attention style (Dao et al.,
// FlashAttention-2): softmax is computed online over key tiles, so the [seq, seq]
// probabilities are never stored. Forward saves each query row's log-sum-exp; backward
// recomputes the probabilities from it. The math is runtime/cpu/attention.h's,
// including its dropout on the probabilities (same Philox indices as the CPU).
//
// Limits of this first version: head_dim and value_dim() <= 256; the dot products run on fp32 CUDA
// cores (not tensor cores), so it is correct and deterministic rather than fast.
#ifndef CONVEYOR_RUNTIME_CUDA_ATTENTION_KERNELS_H_
#define CONVEYOR_RUNTIME_CUDA_ATTENTION_KERNELS_H_

#include <cstdint>

#include "runtime/cuda/philox_uniform.h"
#include "runtime/dtype.h"
#include "runtime/op_params.h"

namespace conveyor::cuda {

inline constexpr int64_t kMaxAttentionHeadDim = 256;

// The wider of the query/key heads and the value heads: what a lane's accumulators must
// cover (kMaxAttentionHeadDim bounds it).
inline int64_t WidestAttentionHead(const AttentionShape& s) {
  return s.head_dim > s.value_dim() ? s.head_dim : s.value_dim();
}

// Dropout on the probabilities: element (b, h, i, j) is kept when
// PhiloxUniform(key, ((first_sample + b) * total_heads + first_head + h) seq^2 + i seq + j)
// >= p, and kept values are scaled by 1 / (1 - p).
struct AttentionDropoutArgs {
  bool enabled = false;
  PhiloxKey key{0, 0};
  float p = 0.0f;
  int64_t first_sample = 0;
  int64_t first_head = 0;
  int64_t total_heads = 0;
};

// qkv [batch * seq, qkv_width] (Megatron's grouped layout); writes ctx [batch * seq,
// context_width = heads * value_dim] and lse fp32 [batch, heads, seq] (log-sum-exp of each scaled,
// masked score row). document_start: device int32 [batch * seq], row i of sample b sees
// keys j with document_start[b * seq + i] <= j <= i (document masking), or null: j <= i;
// window >= 0 (a sliding window) also hides the keys j < i - window, and the key tiles
// wholly outside it are skipped.
void LaunchAttentionForward(DType dtype, const AttentionShape& shape, const void* qkv, float scale,
                            const AttentionDropoutArgs& dropout, const int32_t* document_start,
                            int64_t window, float* lse, void* ctx);

// Overwrites dqkv [batch * seq, qkv_width]. row_dot: device fp32 scratch of
// batch * heads * seq floats (receives D = rowsum(dctx * ctx)).
void LaunchAttentionBackward(DType dtype, const AttentionShape& shape, const void* qkv,
                             const float* lse, const void* ctx, const void* dctx, float scale,
                             const AttentionDropoutArgs& dropout, const int32_t* document_start,
                             int64_t window, float* row_dot, void* dqkv);

}  // namespace conveyor::cuda

#endif  // CONVEYOR_RUNTIME_CUDA_ATTENTION_KERNELS_H_
