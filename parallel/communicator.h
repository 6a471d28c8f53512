// The collectives one process group offers, independent of the transport (gloo for
// host buffers, NCCL for device buffers, or a single rank that talks to nobody).
//
// Every rank of the group must call the same collectives in the same order. Each call
// is bounded by the group's timeout: a rank that never arrives makes the others
// return DeadlineExceeded naming the operation, the group and the missing ranks,
// never hang. After any error the communicator is broken and every later call fails
// with the first error: the job is expected to end.
//
// Messages are typed Buffers (parallel/buffer.h): element type and memory kind are
// declared, and every rank must declare the same types and counts. bf16 travels as
// bf16. The public calls check their arguments here, once for every backend, naming
// the operation and the group; the backends implement the protected Do* functions.
//
// Reductions are deterministic: for every element the contributions are combined in
// rank order ((x0 + x1) + x2) + ..., so the same inputs give the same bits on every
// rank and in every run, and AllReduceSum equals ReduceScatterSum then AllGather. A
// bf16 sum accumulates in fp32 in rank order and rounds to bf16 (nearest, ties to even)
// once, at the end: what widening to fp32, summing and rounding back would give. (NCCL,
// which sums in its own ring or tree order, promises neither; see nccl_communicator.h.)
#ifndef CONVEYOR_PARALLEL_COMMUNICATOR_H_
#define CONVEYOR_PARALLEL_COMMUNICATOR_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "parallel/buffer.h"

namespace conveyor {

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;  // rank within the group
  virtual int size() const = 0;
  virtual const std::string& name() const = 0;  // e.g. "tp[0,1]", for messages
  // Whether this communicator moves buffers in `where`.
  virtual bool Reaches(MemoryKind where) const = 0;

  // In place; every rank ends with the same result. fp32, bf16 or fp64.
  absl::Status AllReduceSum(Buffer data);
  // In place; fp64 only. A NaN anywhere wins, so that every rank sees an overflow alike.
  absl::Status AllReduceMax(Buffer data);
  // Any type. `out` holds size() * in.count elements, rank-major: rank r's `in` lands at
  // slot r, out[r * in.count, (r + 1) * in.count). `in` may be slot rank() of `out` itself
  // (in place, as the distributed optimizer gathers its updated shards); no other overlap.
  absl::Status AllGather(ConstBuffer in, Buffer out);
  // fp32 or bf16. `in` holds size() * out.count elements; rank r receives in `out` the
  // sum over the ranks of their slot r. `out` may be slot rank() of `in` itself (in place,
  // Megatron's reduce-scatter into the gradient buffer's own shard); no other overlap.
  absl::Status ReduceScatterSum(ConstBuffer in, Buffer out);
  // Any type. `root` is a group rank; every other rank's `data` is overwritten.
  absl::Status Broadcast(Buffer data, int root);
  virtual absl::Status Barrier() = 0;

  // One point-to-point transfer; `peer` is a group rank. A send's buffer is only read.
  struct P2POp {
    P2POp(bool send, int rank, Buffer message) : is_send(send), peer(rank), buffer(message) {}
    // fp32 in host memory.
    P2POp(bool send, int rank, float* data, int64_t n) : P2POp(send, rank, MakeBuffer(data, n)) {}

    bool is_send;
    int peer;
    Buffer buffer;
  };
  // Posts every op, then waits for all of them, so a matched exchange (each send has
  // the peer's recv of the same type and count in the peer's batch) cannot deadlock
  // whatever the order within the batches. Messages between two ranks in one direction
  // match in the order they are posted. Any type; one batch keeps to one memory kind.
  absl::Status BatchSendRecv(const std::vector<P2POp>& ops);

  // Bytes this rank has sent in the group's operations so far (those it accepted), as
  // a bandwidth-optimal algorithm sends them, which gloo's and NCCL's ring do: an
  // all-reduce 2 (size - 1) / size of its buffer, a reduce-scatter (size - 1) / size of
  // its `in`, an all-gather its `in` to size - 1 ranks, a broadcast's root its buffer
  // to size - 1 ranks, a batch its sends. In the messages' element types: a bf16
  // message counts half an fp32 one.
  int64_t message_bytes() const { return message_bytes_.load(std::memory_order_relaxed); }

  // Host-memory shorthands for the bookkeeping the trainer keeps on the host (losses,
  // norms, votes, timers): fp32 or fp64 elements, `n` per rank.
  absl::Status AllReduceSum(float* data, int64_t n) { return AllReduceSum(MakeBuffer(data, n)); }
  absl::Status AllReduceSum(double* data, int64_t n) { return AllReduceSum(MakeBuffer(data, n)); }
  absl::Status AllReduceMax(double* data, int64_t n) { return AllReduceMax(MakeBuffer(data, n)); }
  absl::Status AllGather(const float* in, int64_t n_per_rank, float* out) {
    return AllGather(MakeBuffer(in, n_per_rank), MakeBuffer(out, n_per_rank * size()));
  }
  absl::Status ReduceScatterSum(const float* in, int64_t n_per_rank, float* out) {
    return ReduceScatterSum(MakeBuffer(in, n_per_rank * size()), MakeBuffer(out, n_per_rank));
  }
  absl::Status Broadcast(float* data, int64_t n, int root) {
    return Broadcast(MakeBuffer(data, n), root);
  }

 protected:
  // The operations, called only with arguments the public functions accepted: counts
  // agree, types are the operation's, every buffer is in one memory kind this
  // communicator Reaches, overlaps are the documented in-place ones, peers and roots
  // are group ranks. A batch is never empty.
  virtual absl::Status DoAllReduceSum(const Buffer& data) = 0;
  virtual absl::Status DoAllReduceMax(const Buffer& data) = 0;
  virtual absl::Status DoAllGather(const ConstBuffer& in, const Buffer& out) = 0;
  virtual absl::Status DoReduceScatterSum(const ConstBuffer& in, const Buffer& out) = 0;
  virtual absl::Status DoBroadcast(const Buffer& data, int root) = 0;
  virtual absl::Status DoBatchSendRecv(const std::vector<P2POp>& ops) = 0;

 private:
  void Count(int64_t bytes) { message_bytes_.fetch_add(bytes, std::memory_order_relaxed); }

  // Atomic: a log line may read it while the gradient-reduction thread adds to it.
  std::atomic<int64_t> message_bytes_{0};
};

}  // namespace conveyor

#endif  // CONVEYOR_PARALLEL_COMMUNICATOR_H_
