// The data-parallel sums of gradient buckets, in fp32 or, with --grad-reduce-in-bf16,
// as bf16 messages: the bucket is rounded to bf16 in a staging buffer, summed there
// (in rank order, accumulated in fp32: parallel/communicator.h), and widened back into
// the fp32 gradients. Half the bytes on the wire, at bf16's precision for the sum.
#ifndef CONVEYOR_TRAINER_OPTIMIZATION_GRADIENT_REDUCTION_H_
#define CONVEYOR_TRAINER_OPTIMIZATION_GRADIENT_REDUCTION_H_

#include <cstdint>

#include "absl/status/status.h"
#include "parallel/communicator.h"
#include "runtime/optimizer_ops.h"
#include "runtime/tensor.h"

namespace conveyor {

class GradientReduction {
 public:
  // `largest_bucket` is the most elements one call reduces (the staging buffer's size
  // under `in_bf16`). `dp` and `ops` (on the gradients' device) must outlive it.
  GradientReduction(Communicator& dp, const OptimizerOps& ops, bool in_bf16,
                    int64_t largest_bucket);

  // grads[start, start + count) of an fp32 gradient buffer, summed over DP in place.
  absl::Status AllReduce(Tensor grads, int64_t start, int64_t count);
  // Each rank r ends with the DP sum of its slice r of grads[start, start + count), in
  // place (count is a multiple of DP); the other slices are left as they were.
  absl::Status ReduceScatter(Tensor grads, int64_t start, int64_t count);

 private:
  Communicator& dp_;
  const OptimizerOps& ops_;
  Tensor staging_;  // bf16; empty when reducing in fp32
};

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_OPTIMIZATION_GRADIENT_REDUCTION_H_
