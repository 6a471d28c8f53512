#include "model/bucket_layout.h"

#include <algorithm>

namespace conveyor {

std::vector<BucketSpan> LayOutBuckets(absl::Span<const int64_t> sizes, int64_t bucket_elements,
                                      int64_t align) {
  std::vector<BucketSpan> buckets;
  BucketSpan open{0, 0, 0, 0, 0};
  auto close = [&] {
    open.size = (open.used + align - 1) / align * align;
    buckets.push_back(open);
    open = BucketSpan{open.first + open.count, 0, open.start + open.size, 0, 0};
  };
  for (const int64_t n : sizes) {
    if (open.used > 0 && open.used + n > bucket_elements) close();
    ++open.count;
    open.used += n;
  }
  if (open.count > 0) close();
  return buckets;
}

int64_t UsedInSlice(const BucketSpan& bucket, int parts, int rank) {
  const int64_t slice = bucket.size / parts;
  return std::clamp<int64_t>(bucket.used - rank * slice, 0, slice);
}

}  // namespace conveyor
