#include "parallel/buffer.h"

namespace conveyor {

size_t ElementSize(ScalarType type) {
  switch (type) {
    case ScalarType::kFloat32:
    case ScalarType::kInt32:
      return 4;
    case ScalarType::kBFloat16:
      return 2;
    case ScalarType::kFloat64:
    case ScalarType::kInt64:
      return 8;
    case ScalarType::kByte:
      return 1;
  }
  return 1;
}

absl::string_view ScalarTypeName(ScalarType type) {
  switch (type) {
    case ScalarType::kFloat32:
      return "fp32";
    case ScalarType::kBFloat16:
      return "bf16";
    case ScalarType::kFloat64:
      return "fp64";
    case ScalarType::kInt32:
      return "int32";
    case ScalarType::kInt64:
      return "int64";
    case ScalarType::kByte:
      return "byte";
  }
  return "?";
}

absl::string_view MemoryKindName(MemoryKind where) {
  return where == MemoryKind::kHost ? "host memory" : "device memory";
}

}  // namespace conveyor
