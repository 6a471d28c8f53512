// How a data-parallel buffer is cut into buckets (Megatron's bucketing), as arithmetic
// on parameter sizes: shared by the updaters that lay out their buffers
// (trainer/optimization/parameter_buckets.h) and the memory model that predicts them.
//
// Parameters go in buffer order; a bucket closes when the next parameter would take it
// past `bucket_elements` (a larger parameter gets a bucket of its own), and is padded
// to a multiple of `align` (DP under the distributed optimizer, so that every rank's
// slice of a bucket is whole).
#ifndef CONVEYOR_MODEL_BUCKET_LAYOUT_H_
#define CONVEYOR_MODEL_BUCKET_LAYOUT_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace conveyor {

struct BucketSpan {
  int64_t first;  // index of its first parameter
  int64_t count;  // parameters
  int64_t start;  // first element in the buffer
  int64_t used;   // parameter elements
  int64_t size;   // elements, padding included
};

std::vector<BucketSpan> LayOutBuckets(absl::Span<const int64_t> sizes, int64_t bucket_elements,
                                      int64_t align);

// Parameter elements in slice `rank` of `bucket` cut into `parts` equal slices (the
// padding sits at the bucket's end).
int64_t UsedInSlice(const BucketSpan& bucket, int parts, int rank);

}  // namespace conveyor

#endif  // CONVEYOR_MODEL_BUCKET_LAYOUT_H_
