// Ring attention's block ops on the device (runtime/ops.h: PackKeysValues,
// AddKeyValueGrad, AttentionBlockForward, AttentionBlockBackward), the math of
// runtime/cpu/attention.h: this rank's queries against one block of keys and values
// that came around the context-parallel ring, masked by global position (causal, and
// documents) and merged into a running fp32 result by log-sum-exps.
//
// One warp per query row (forward, dQ) or per key row (dK, dV), its lanes over the heads:
// correct and deterministic (every sum in a fixed order, no atomics), not fast.
#ifndef CONVEYOR_RUNTIME_CUDA_RING_ATTENTION_KERNELS_H_
#define CONVEYOR_RUNTIME_CUDA_RING_ATTENTION_KERNELS_H_

#include <cstdint>

#include "runtime/cuda/attention_kernels.h"
#include "runtime/dtype.h"
#include "runtime/op_params.h"

namespace conveyor::cuda {

// A block's geometry and mask, device pointers. Query row i of sample b (position
// query_positions[i]) sees key row j (position key_positions[j]) when
//   document_start[b * seq + i] (0 when null) <= key_positions[j] <= query_positions[i]
// and, with window >= 0 (a sliding window), query_positions[i] - window <= key_positions[j].
struct AttentionBlockArgs {
  AttentionShape shape;  // this rank's rows: seq = query rows per sample
  int64_t key_rows = 0;  // per sample in the block
  const int32_t* query_positions = nullptr;
  const int32_t* key_positions = nullptr;
  const int32_t* document_start = nullptr;
  int64_t sample_length = 0;  // the whole sample's tokens: the dropout indices' L
  int64_t window = -1;
};

// kv [batch * seq, kv_width] = qkv's key and value heads (dtype both).
void LaunchPackKeysValues(DType dtype, const AttentionShape& shape, const void* qkv, void* kv);
// dqkv's key and value heads (dtype) += dkv (fp32, PackKeysValues' layout).
void LaunchAddKeyValueGrad(DType dtype, const AttentionShape& shape, const float* dkv, void* dqkv);

// Merges the block into ctx (fp32 [batch * seq, context_width]) and lse (fp32
// [batch, heads, seq]); `first` overwrites them. qkv and kv of `dtype`.
void LaunchAttentionBlockForward(DType dtype, const AttentionBlockArgs& args, const void* qkv,
                                 const void* kv, float scale, const AttentionDropoutArgs& dropout,
                                 bool first, float* ctx, float* lse);

// From the final ctx (dtype) and lse: dqkv's query heads (dtype) += dQ, dkv (fp32) +=
// (dK, dV). row_dot: device fp32 scratch of batch * heads * seq floats.
void LaunchAttentionBlockBackward(DType dtype, const AttentionBlockArgs& args, const void* qkv,
                                  const void* kv, const void* ctx, const float* lse,
                                  const void* dctx, float scale,
                                  const AttentionDropoutArgs& dropout, float* row_dot, void* dqkv,
                                  float* dkv);

}  // namespace conveyor::cuda

#endif  // CONVEYOR_RUNTIME_CUDA_RING_ATTENTION_KERNELS_H_
