// Megatron's contiguous gradient buffer (its ParamAndGradBuffer): the parameters an
// updater steps laid end to end in buckets (model/bucket_layout.h: in reverse order, as
// backward finishes the last layers first, so the first bucket is ready first), each
// parameter's gradient a view into one fp32 buffer (Megatron's main_grad), so that
// data-parallel reductions run in place on the buffer instead of on a second copy of
// every gradient.
#ifndef CONVEYOR_TRAINER_OPTIMIZATION_PARAMETER_BUCKETS_H_
#define CONVEYOR_TRAINER_OPTIMIZATION_PARAMETER_BUCKETS_H_

#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "model/parameter.h"
#include "runtime/device_memory.h"
#include "runtime/tensor.h"

namespace conveyor {

struct BucketEntry {
  Parameter* param;
  int64_t start;  // first element in the buffer
};

struct Bucket {
  std::vector<BucketEntry> entries;  // in buffer order
  int64_t start = 0;                 // first element in the buffer
  int64_t size = 0;                  // elements, padding included
  int64_t padding = 0;               // elements after the last parameter
};

// `params` in the model's order; the buckets hold them reversed.
std::vector<Bucket> MakeBuckets(const std::vector<Parameter*>& params, int64_t bucket_elements,
                                int64_t align);

// Elements of the buffer the buckets tile.
int64_t BufferElements(const std::vector<Bucket>& buckets);
// The size of the largest bucket (0 when there is none).
int64_t LargestBucket(const std::vector<Bucket>& buckets);

// An fp32 buffer for `buckets` on `device` (kGrads) holding every parameter's grad,
// each replaced by a view into the buffer (its old storage freed); the padding is zero.
Tensor AdoptGradients(const std::vector<Bucket>& buckets, Device device);

// Which buckets backward has completed this step: a bucket is complete once every one
// of its parameters was reported (ParameterUpdater::GradientsReady).
class BucketReadiness {
 public:
  explicit BucketReadiness(const std::vector<Bucket>& buckets);
  // The buckets that `ready` completes, each once per step.
  std::vector<size_t> Complete(const std::vector<Parameter*>& ready);
  // The index of the bucket holding `p`, or -1.
  int64_t BucketOf(const Parameter* p) const;
  void Reset();  // a new step

 private:
  std::map<const Parameter*, size_t> bucket_of_;
  std::vector<int> sizes_;    // parameters per bucket
  std::vector<int> pending_;  // not yet reported this step
  std::set<const Parameter*> reported_;
};

// A buffer of `dtype` (kWeights) holding `tensor_of(param)` of every parameter, each
// replaced by a view into the buffer; the padding is zero.
template <typename TensorOf>
Tensor AdoptTensors(const std::vector<Bucket>& buckets, DType dtype, Device device,
                    TensorOf tensor_of) {
  Tensor buffer = Tensor::Zeros({BufferElements(buckets)}, MemoryCategory::kWeights, dtype, device);
  for (const Bucket& bucket : buckets) {
    for (const BucketEntry& e : bucket.entries) {
      Tensor& t = tensor_of(*e.param);
      Tensor view = buffer.View(e.start, t.shape());
      view.CopyFrom(t);
      t = view;
    }
  }
  return buffer;
}

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_OPTIMIZATION_PARAMETER_BUCKETS_H_
