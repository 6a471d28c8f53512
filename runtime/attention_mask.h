// The mask of the op interface's attention (runtime/ops.h), apart from op_params.h
// because it holds host spans (op_params.h is also read by nvcc).
#ifndef CONVEYOR_RUNTIME_ATTENTION_MASK_H_
#define CONVEYOR_RUNTIME_ATTENTION_MASK_H_

#include <cstdint>

#include "absl/types/span.h"

namespace conveyor {

// Which keys a query row sees: query row i of sample b, at position
// query_positions[i] in the sample, sees the key row j at position key_positions[j] when
//   max(document_start[b * seq + i], query_positions[i] - window)
//     <= key_positions[j] <= query_positions[i]
// (causal attention; document masking, Megatron's --reset-attention-mask, keeps a query
// inside its own document; a sliding window, Megatron's --window-size (window, 0), keeps
// it to the `window` keys before it and itself). Empty positions: the row index (the
// whole sample is held here, keys are the queries' rows); empty document_start: 0 (one
// document); window -1: unbounded. Host arrays.
struct AttentionMask {
  absl::Span<const int32_t> query_positions;  // [seq]
  absl::Span<const int32_t> key_positions;    // [key rows per sample]
  absl::Span<const int32_t> document_start;   // [batch * seq]
  int64_t window = -1;
};

}  // namespace conveyor

#endif  // CONVEYOR_RUNTIME_ATTENTION_MASK_H_
