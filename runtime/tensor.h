// A dense, row-major tensor on the host or a GPU. Its bytes are counted by MemoryTracker
// under the category given at creation, so the memory report sees every buffer. Copies
// of a Tensor share its storage; Clone makes a deep copy.
#ifndef CONVEYOR_RUNTIME_TENSOR_H_
#define CONVEYOR_RUNTIME_TENSOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/device_memory.h"
#include "runtime/dtype.h"
#include "runtime/memory_tracker.h"

namespace conveyor {

class Tensor {
 public:
  Tensor() = default;  // empty: no shape, no storage

  // Zero-filled tensor.
  static Tensor Zeros(std::vector<int64_t> shape, MemoryCategory category,
                      DType dtype = DType::kFloat32, Device device = Device::kCpu);
  // A tensor whose elements are undefined until written (NaN on the host, so that a
  // read before the first write shows): for outputs their first writer fills whole.
  static Tensor Uninitialized(std::vector<int64_t> shape, MemoryCategory category,
                              DType dtype = DType::kFloat32, Device device = Device::kCpu);

  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t dim(int i) const { return shape_[i]; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t numel() const { return numel_; }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  MemoryCategory category() const { return category_; }
  bool empty() const { return storage_ == nullptr; }
  int64_t nbytes() const { return numel_ * static_cast<int64_t>(SizeOf(dtype_)); }

  // fp32 elements (a device address for a GPU tensor); the tensor must be fp32
  // (checked in debug builds).
  float* data();
  const float* data() const;
  void* raw() { return storage_.get(); }
  const void* raw() const { return storage_.get(); }

  // Elements [offset, offset + numel of `shape`) of this tensor, as a tensor of `shape`
  // that shares its storage (and keeps it alive): no new bytes, none counted. This is how
  // a parameter's gradient lives inside its data-parallel buffer (Megatron's main_grad).
  Tensor View(int64_t offset, std::vector<int64_t> shape) const;

  // Deep copy on the same device, counted under `category`.
  Tensor Clone(MemoryCategory category) const;
  // Deep copy on `device` (the same bytes: no dtype conversion).
  Tensor To(Device device, MemoryCategory category) const;
  // Copies `other`'s bytes into this tensor; dtypes and sizes must match, devices may not.
  void CopyFrom(const Tensor& other);
  void SetZero();

  std::string ShapeString() const;

 private:
  static Tensor Allocate(std::vector<int64_t> shape, MemoryCategory category, DType dtype,
                         Device device, bool zeroed);

  std::vector<int64_t> shape_;
  int64_t numel_ = 0;
  DType dtype_ = DType::kFloat32;
  Device device_ = Device::kCpu;
  MemoryCategory category_ = MemoryCategory::kOther;
  std::shared_ptr<void> storage_;  // frees the bytes and tells the tracker
};

}  // namespace conveyor

#endif  // CONVEYOR_RUNTIME_TENSOR_H_
