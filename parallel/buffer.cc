#include "parallel/buffer.h"

namespace conveyor {

absl::string_view MemoryKindName(MemoryKind where) {
  return where == MemoryKind::kHost ? "host memory" : "device memory";
}

}  // namespace conveyor
