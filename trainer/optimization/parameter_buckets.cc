#include "trainer/optimization/parameter_buckets.h"

#include <algorithm>

#include "model/bucket_layout.h"

namespace conveyor {

std::vector<Bucket> MakeBuckets(const std::vector<Parameter*>& params, int64_t bucket_elements,
                                int64_t align) {
  const std::vector<Parameter*> order(params.rbegin(), params.rend());
  std::vector<int64_t> sizes;
  for (const Parameter* p : order) sizes.push_back(p->local_numel());
  std::vector<Bucket> buckets;
  for (const BucketSpan& span : LayOutBuckets(sizes, bucket_elements, align)) {
    Bucket bucket;
    bucket.start = span.start;
    bucket.size = span.size;
    bucket.padding = span.size - span.used;
    int64_t at = span.start;
    for (int64_t i = span.first; i < span.first + span.count; ++i) {
      bucket.entries.push_back({order[i], at});
      at += sizes[i];
    }
    buckets.push_back(std::move(bucket));
  }
  return buckets;
}

int64_t LargestBucket(const std::vector<Bucket>& buckets) {
  int64_t largest = 0;
  for (const Bucket& b : buckets) largest = std::max(largest, b.size);
  return largest;
}

int64_t BufferElements(const std::vector<Bucket>& buckets) {
  return buckets.empty() ? 0 : buckets.back().start + buckets.back().size;
}

Tensor AdoptGradients(const std::vector<Bucket>& buckets, Device device) {
  Tensor buffer =
      Tensor::Zeros({BufferElements(buckets)}, MemoryCategory::kGrads, DType::kFloat32, device);
  for (const Bucket& bucket : buckets) {
    for (const BucketEntry& e : bucket.entries) {
      Tensor view = buffer.View(e.start, e.param->local_shape);
      view.CopyFrom(e.param->grad);
      e.param->grad = view;
    }
  }
  return buffer;
}

BucketReadiness::BucketReadiness(const std::vector<Bucket>& buckets) {
  for (size_t b = 0; b < buckets.size(); ++b) {
    for (const BucketEntry& e : buckets[b].entries) bucket_of_[e.param] = b;
    sizes_.push_back(static_cast<int>(buckets[b].entries.size()));
  }
  Reset();
}

std::vector<size_t> BucketReadiness::Complete(const std::vector<Parameter*>& ready) {
  std::vector<size_t> complete;
  for (const Parameter* p : ready) {
    auto it = bucket_of_.find(p);
    if (it == bucket_of_.end() || !reported_.insert(p).second) continue;
    if (--pending_[it->second] == 0) complete.push_back(it->second);
  }
  return complete;
}

int64_t BucketReadiness::BucketOf(const Parameter* p) const {
  auto it = bucket_of_.find(p);
  return it == bucket_of_.end() ? -1 : static_cast<int64_t>(it->second);
}

void BucketReadiness::Reset() {
  pending_ = sizes_;
  reported_.clear();
}

}  // namespace conveyor
