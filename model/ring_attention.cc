#include "model/ring_attention.h"

#include <future>
#include <utility>
#include <vector>

#include "base/status_macros.h"
#include "model/context_shard.h"
#include "parallel/tensor_buffer.h"

namespace conveyor {
namespace {

int Next(const Communicator& ring) { return (ring.rank() + 1) % ring.size(); }
int Previous(const Communicator& ring) { return (ring.rank() + ring.size() - 1) % ring.size(); }

// The masks of this rank's queries against the block that started on `source`; the
// vectors it points into live in the object.
class BlockMask {
 public:
  BlockMask(const MicroBatchContext& mb, int64_t window)
      : mb_(mb), window_(window), query_positions_(SamplePositions(mb, mb.cp_rank)) {
    if (mb.documents != nullptr) {
      document_start_ = LocalRows(mb, absl::MakeConstSpan(mb.documents->document_start));
    }
  }
  AttentionMask For(int source) {
    key_positions_ = SamplePositions(mb_, source);
    return {query_positions_, key_positions_, document_start_, window_};
  }

 private:
  const MicroBatchContext& mb_;
  int64_t window_;
  std::vector<int32_t> query_positions_, key_positions_, document_start_;
};

// Sends `send` on around the ring and receives the previous rank's into `receive`, on
// another thread: the caller computes meanwhile and then waits on the result.
std::future<absl::Status> PassOn(Communicator* ring, Tensor* send, Tensor* receive) {
  return std::async(std::launch::async, [ring, send, receive] {
    return ring->BatchSendRecv({{true, Next(*ring), TensorBuffer(*send)},
                                {false, Previous(*ring), TensorBuffer(*receive)}});
  });
}

Tensor KeyValueBlock(const Ops& ops, const AttentionShape& shape) {
  return ops.NewActivation({shape.batch * shape.seq, shape.kv_width()});
}

}  // namespace

absl::Status RingAttentionForward(const Ops& ops, Communicator* ring, const MicroBatchContext& mb,
                                  const AttentionShape& shape, const Tensor& qkv, float scale,
                                  const AttentionDropout& dropout, int64_t window, Tensor* lse,
                                  Tensor* ctx) {
  const int cp = ring->size();
  Tensor held = KeyValueBlock(ops, shape), arriving = KeyValueBlock(ops, shape);
  ops.PackKeysValues(shape, qkv, &held);
  Tensor running = ops.NewFloatActivation(ctx->shape());
  *lse = ops.NewFloatActivation({shape.batch, shape.heads(), shape.seq});
  BlockMask masks(mb, window);
  for (int step = 0; step < cp; ++step) {
    const int source = (ring->rank() - step + cp) % cp;
    std::future<absl::Status> transfer;
    if (step + 1 < cp) transfer = PassOn(ring, &held, &arriving);
    ops.AttentionBlockForward(shape, shape.seq, masks.For(source), qkv, held, scale, dropout,
                              /*first=*/step == 0, &running, lse);
    if (transfer.valid()) {
      RETURN_IF_ERROR(transfer.get()) << "ring attention forward, step " << step;
    }
    std::swap(held, arriving);
  }
  ops.Cast(running, ctx);
  return absl::OkStatus();
}

absl::Status RingAttentionBackward(const Ops& ops, Communicator* ring, const MicroBatchContext& mb,
                                   const AttentionShape& shape, const Tensor& qkv,
                                   const Tensor& lse, const Tensor& ctx, const Tensor& dctx,
                                   float scale, const AttentionDropout& dropout, int64_t window,
                                   Tensor* dqkv) {
  const int cp = ring->size();
  Tensor held = KeyValueBlock(ops, shape), arriving = KeyValueBlock(ops, shape);
  Tensor held_grad =
      Tensor::Zeros(held.shape(), MemoryCategory::kActivations, DType::kFloat32, ops.device());
  Tensor arriving_grad = ops.NewFloatActivation(held.shape());
  ops.PackKeysValues(shape, qkv, &held);
  dqkv->SetZero();
  BlockMask masks(mb, window);
  for (int step = 0; step < cp; ++step) {
    const int source = (ring->rank() - step + cp) % cp;
    // The block moves on while this rank computes with it; its gradient moves once
    // this rank's share is in.
    std::future<absl::Status> transfer;
    if (step + 1 < cp) transfer = PassOn(ring, &held, &arriving);
    ops.AttentionBlockBackward(shape, shape.seq, masks.For(source), qkv, held, ctx, lse, dctx,
                               scale, dropout, dqkv, &held_grad);
    if (transfer.valid()) {
      RETURN_IF_ERROR(transfer.get()) << "ring attention backward, step " << step;
    }
    RETURN_IF_ERROR(PassOn(ring, &held_grad, &arriving_grad).get())
        << "ring attention backward, key/value gradient of step " << step;
    std::swap(held, arriving);
    std::swap(held_grad, arriving_grad);
  }
  // After CP hops each block's gradient is back on the rank whose keys it is.
  ops.AddKeyValueGrad(shape, held_grad, dqkv);
  return absl::OkStatus();
}

}  // namespace conveyor
