// Attention under context parallelism: ring attention (Liu et al. 2023, "Ring Attention
// with Blockwise Transformers for Near-Infinite Context"; Megatron's p2p context
// parallelism). Each of the CP ranks holds the queries, keys and values of its chunks of
// every sample (model/context_shard.h). In CP steps, rank r computes its queries against
// the key/value block that started on rank (r - s) mod CP while it passes that block on
// to rank r + 1 and receives the next one from rank r - 1 (on a second thread: the
// transfer overlaps the block's attention). The blocks are merged by their log-sum-exps
// (runtime/cpu/attention.h), which is exact: the result is the single-rank attention,
// masks (causal by global position, documents) and dropout (drawn by global position)
// included, and a sliding window: a block wholly outside every query's window is
// passed on without being computed. Backward sends each block around the ring once more
// with its key/value gradient, which every rank adds its queries' share to; after CP
// hops the gradient is home.
#ifndef CONVEYOR_MODEL_RING_ATTENTION_H_
#define CONVEYOR_MODEL_RING_ATTENTION_H_

#include "absl/status/status.h"
#include "model/micro_batch.h"
#include "parallel/communicator.h"
#include "runtime/ops.h"

namespace conveyor {

// shape: this rank's rows (seq = mb.local_seq()); qkv its fused rows. Writes ctx
// (compute type, [rows, heads * head_dim]) and lse (allocated: fp32 [batch, heads,
// local seq]), what backward needs besides qkv and ctx. `ring` is the context-parallel
// group (of mb.cp_size ranks). window: the layer's sliding window (AttentionMask::window,
// -1 none).
absl::Status RingAttentionForward(const Ops& ops, Communicator* ring, const MicroBatchContext& mb,
                                  const AttentionShape& shape, const Tensor& qkv, float scale,
                                  const AttentionDropout& dropout, int64_t window, Tensor* lse,
                                  Tensor* ctx);

// Overwrites dqkv [rows, qkv_width].
absl::Status RingAttentionBackward(const Ops& ops, Communicator* ring, const MicroBatchContext& mb,
                                   const AttentionShape& shape, const Tensor& qkv,
                                   const Tensor& lse, const Tensor& ctx, const Tensor& dctx,
                                   float scale, const AttentionDropout& dropout, int64_t window,
                                   Tensor* dqkv);

}  // namespace conveyor

#endif  // CONVEYOR_MODEL_RING_ATTENTION_H_
