// The collectives one process group offers, independent of the transport (gloo for
// host buffers, NCCL for device buffers, or a single rank that talks to nobody).
//
// Every rank of the group must call the same collectives in the same order. Each call
// is bounded by the group's timeout: a rank that never arrives makes the others
// return DeadlineExceeded naming the operation, the group and the missing ranks,
// never hang. After any error the communicator is broken and every later call fails
// with the first error: the job is expected to end.
//
// Reductions are deterministic: for every element the contributions are combined in
// rank order ((x0 + x1) + x2) + ..., so the same inputs give the same bits on every
// rank and in every run, and AllReduceSum equals ReduceScatterSum then AllGather.
#ifndef CONVEYOR_PARALLEL_COMMUNICATOR_H_
#define CONVEYOR_PARALLEL_COMMUNICATOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace conveyor {

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;  // rank within the group
  virtual int size() const = 0;
  virtual const std::string& name() const = 0;  // e.g. "tp[0,1]", for messages

  // In place over n elements; every rank ends with the same result.
  virtual absl::Status AllReduceSum(float* data, int64_t n) = 0;
  virtual absl::Status AllReduceSum(double* data, int64_t n) = 0;
  virtual absl::Status AllReduceMax(double* data, int64_t n) = 0;

  // `out` holds size() * n_per_rank elements, rank-major: rank r's `in` lands at
  // out + r * n_per_rank. `in` may alias that slot of `out`.
  virtual absl::Status AllGather(const float* in, int64_t n_per_rank, float* out) = 0;
  // `in` holds size() * n_per_rank elements; rank r receives the sum of every rank's
  // slice r in `out` (n_per_rank elements).
  virtual absl::Status ReduceScatterSum(const float* in, int64_t n_per_rank, float* out) = 0;
  // `root` is a group rank; every other rank's `data` is overwritten.
  virtual absl::Status Broadcast(float* data, int64_t n, int root) = 0;
  virtual absl::Status Barrier() = 0;

  // One point-to-point transfer; `peer` is a group rank. A send's `data` is only read.
  struct P2POp {
    bool is_send;
    int peer;
    float* data;
    int64_t n;
  };
  // Posts every op, then waits for all of them, so a matched exchange (each send has
  // the peer's recv of the same size in the peer's batch) cannot deadlock whatever the
  // order within the batches. Messages between two ranks in one direction match in
  // the order they are posted.
  virtual absl::Status BatchSendRecv(const std::vector<P2POp>& ops) = 0;
};

}  // namespace conveyor

#endif  // CONVEYOR_PARALLEL_COMMUNICATOR_H_
