#include "runtime/tensor.h"

#include <cassert>

#include "absl/strings/str_join.h"

namespace conveyor {

Tensor Tensor::Zeros(std::vector<int64_t> shape, MemoryCategory category, DType dtype,
                     Device device) {
  return Allocate(std::move(shape), category, dtype, device, /*zeroed=*/true);
}

Tensor Tensor::Uninitialized(std::vector<int64_t> shape, MemoryCategory category, DType dtype,
                             Device device) {
  return Allocate(std::move(shape), category, dtype, device, /*zeroed=*/false);
}

Tensor Tensor::Allocate(std::vector<int64_t> shape, MemoryCategory category, DType dtype,
                        Device device, bool zeroed) {
  Tensor t;
  t.numel_ = 1;
  for (int64_t d : shape) t.numel_ *= d;
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.device_ = device;
  t.category_ = category;
  const int64_t bytes = t.nbytes();
  DeviceMemory* memory = &MemoryOf(device);
  void* p = zeroed ? memory->AllocateZeroed(bytes) : memory->Allocate(bytes);
  MemoryTracker::Global().Allocated(category, bytes);
  t.storage_ = std::shared_ptr<void>(p, [memory, category, bytes](void* q) {
    MemoryTracker::Global().Freed(category, bytes);
    memory->Free(q, bytes);
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

Tensor Tensor::View(int64_t offset, std::vector<int64_t> shape) const {
  Tensor view;
  view.numel_ = 1;
  for (int64_t d : shape) view.numel_ *= d;
  assert(offset >= 0 && offset + view.numel_ <= numel_);
  view.shape_ = std::move(shape);
  view.dtype_ = dtype_;
  view.device_ = device_;
  view.category_ = category_;
  char* first = static_cast<char*>(storage_.get()) + offset * static_cast<int64_t>(SizeOf(dtype_));
  view.storage_ = std::shared_ptr<void>(storage_, first);  // aliasing: shares ownership
  return view;
}

Tensor Tensor::Clone(MemoryCategory category) const { return To(device_, category); }

Tensor Tensor::To(Device device, MemoryCategory category) const {
  Tensor copy = Uninitialized(shape_, category, dtype_, device);
  copy.CopyFrom(*this);
  return copy;
}

void Tensor::CopyFrom(const Tensor& other) {
  assert(dtype_ == other.dtype_ && numel_ == other.numel_);
  if (numel_ == 0) return;
  if (device_ == other.device_) {
    MemoryOf(device_).Copy(raw(), other.raw(), nbytes());
  } else if (other.device_ == Device::kCpu) {
    MemoryOf(device_).CopyFromHost(raw(), other.raw(), nbytes());
  } else {
    MemoryOf(other.device_).CopyToHost(raw(), other.raw(), nbytes());
  }
}

void Tensor::SetZero() {
  if (numel_ > 0) MemoryOf(device_).Zero(raw(), nbytes());
}

std::string Tensor::ShapeString() const { return "[" + absl::StrJoin(shape_, ", ") + "]"; }

}  // namespace conveyor
