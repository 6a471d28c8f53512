// A tensor as a communicator's message: its elements, dtype and memory, as it declares
// them (a CUDA tensor is device memory), so that bf16 tensors travel as bf16 and routing
// follows the tensor.
#ifndef CONVEYOR_PARALLEL_TENSOR_BUFFER_H_
#define CONVEYOR_PARALLEL_TENSOR_BUFFER_H_

#include "parallel/buffer.h"
#include "runtime/device_memory.h"
#include "runtime/dtype.h"
#include "runtime/tensor.h"

namespace conveyor {

inline MemoryKind MemoryKindOf(Device device) {
  return device == Device::kCpu ? MemoryKind::kHost : MemoryKind::kDevice;
}

inline Buffer TensorBuffer(Tensor& t) {
  return Buffer(t.raw(), t.numel(), t.dtype(), MemoryKindOf(t.device()));
}

inline ConstBuffer TensorBuffer(const Tensor& t) {
  return ConstBuffer(t.raw(), t.numel(), t.dtype(), MemoryKindOf(t.device()));
}

}  // namespace conveyor

#endif  // CONVEYOR_PARALLEL_TENSOR_BUFFER_H_
