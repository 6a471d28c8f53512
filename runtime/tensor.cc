#include "runtime/tensor.h"

#include <cassert>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_join.h"

namespace conveyor {
namespace {

// 64-byte alignment keeps BLAS and vector loads on cache-line boundaries.
constexpr size_t kAlignment = 64;

}  // namespace

Tensor Tensor::Zeros(std::vector<int64_t> shape, MemoryCategory category, DType dtype) {
  Tensor t;
  t.numel_ = 1;
  for (int64_t d : shape) t.numel_ *= d;
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.category_ = category;
  const int64_t bytes = t.nbytes();
  const size_t padded = (static_cast<size_t>(bytes) + kAlignment - 1) / kAlignment * kAlignment;
  void* p = std::aligned_alloc(kAlignment, padded == 0 ? kAlignment : padded);
  if (p == nullptr) std::abort();  // out of host memory: nothing sensible to return
  std::memset(p, 0, padded);
  MemoryTracker::Global().Allocated(category, bytes);
  t.storage_ = std::shared_ptr<void>(p, [category, bytes](void* q) {
    MemoryTracker::Global().Freed(category, bytes);
    std::free(q);
  });
  return t;
}

float* Tensor::data() {
  assert(dtype_ == DType::kFloat32);
  return static_cast<float*>(storage_.get());
}

const float* Tensor::data() const {
  assert(dtype_ == DType::kFloat32);
  return static_cast<const float*>(storage_.get());
}

Tensor Tensor::Clone(MemoryCategory category) const {
  Tensor copy = Zeros(shape_, category, dtype_);
  if (numel_ > 0) std::memcpy(copy.raw(), raw(), nbytes());
  return copy;
}

void Tensor::SetZero() {
  if (numel_ > 0) std::memset(raw(), 0, nbytes());
}

std::string Tensor::ShapeString() const { return "[" + absl::StrJoin(shape_, ", ") + "]"; }

}  // namespace conveyor
