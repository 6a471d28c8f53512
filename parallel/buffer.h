// What one message of a collective or point-to-point transfer is: where its elements
// start, how many there are, their type, and which memory holds them. The element type
// lets bf16 travel as bf16 (2 bytes an element) and be summed as bf16; the memory kind
// is declared by the caller, who knows where a tensor lives, so a communicator that
// serves host and device buffers (RoutedCommunicator) routes by it instead of asking
// the driver about pointers.
#ifndef CONVEYOR_PARALLEL_BUFFER_H_
#define CONVEYOR_PARALLEL_BUFFER_H_

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "runtime/dtype.h"

namespace conveyor {

// The element type is runtime/dtype.h's DType; which operations take which types is the
// Communicator's to say (communicator.h).

// kDevice: the accelerator's memory of this rank (what the DeviceTransport moves).
enum class MemoryKind { kHost, kDevice };

absl::string_view MemoryKindName(MemoryKind where);  // "host memory", "device memory"

// A buffer an operation writes (and may read).
struct Buffer {
  Buffer() = default;
  Buffer(void* start, int64_t elements, DType element_type, MemoryKind memory)
      : data(start), count(elements), type(element_type), where(memory) {}

  int64_t bytes() const { return count * static_cast<int64_t>(SizeOf(type)); }
  // Elements [first, first + n) of this buffer.
  Buffer Slice(int64_t first, int64_t n) const {
    return Buffer(static_cast<char*>(data) + first * static_cast<int64_t>(SizeOf(type)), n, type,
                  where);
  }

  void* data = nullptr;
  int64_t count = 0;  // elements of `type`
  DType type = DType::kFloat32;
  MemoryKind where = MemoryKind::kHost;
};

// A buffer an operation only reads.
struct ConstBuffer {
  ConstBuffer() = default;
  ConstBuffer(const void* start, int64_t elements, DType element_type, MemoryKind memory)
      : data(start), count(elements), type(element_type), where(memory) {}
  ConstBuffer(const Buffer& b)  // NOLINT(google-explicit-constructor): any buffer is readable
      : data(b.data), count(b.count), type(b.type), where(b.where) {}

  int64_t bytes() const { return count * static_cast<int64_t>(SizeOf(type)); }

  const void* data = nullptr;
  int64_t count = 0;
  DType type = DType::kFloat32;
  MemoryKind where = MemoryKind::kHost;
};

// `count` elements of T at `data`, in `where` (host memory unless told).
template <typename T>
Buffer MakeBuffer(T* data, int64_t count, MemoryKind where = MemoryKind::kHost) {
  return Buffer(data, count, DTypeOf<T>::value, where);
}
template <typename T>
ConstBuffer MakeBuffer(const T* data, int64_t count, MemoryKind where = MemoryKind::kHost) {
  return ConstBuffer(data, count, DTypeOf<T>::value, where);
}

}  // namespace conveyor

#endif  // CONVEYOR_PARALLEL_BUFFER_H_
