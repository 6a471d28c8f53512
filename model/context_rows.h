// Per-token host arrays of a whole micro-batch under context parallelism: what one rank
// would hold, assembled from the context-parallel ranks' rows, and a rank's rows of it.
// Decisions that depend on every token of the micro-batch (a mixture of experts'
// capacity, its load-balancing statistics) are taken on the assembled array, so each
// layout takes them as one rank does.
#ifndef CONVEYOR_MODEL_CONTEXT_ROWS_H_
#define CONVEYOR_MODEL_CONTEXT_ROWS_H_

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "model/context_shard.h"
#include "model/micro_batch.h"
#include "parallel/communicator.h"

namespace conveyor {

// From this rank's rows `local` ([mb.tokens(), width], model/context_shard.h's order),
// the micro-batch's [batch * seq, width] in sample order, gathered over the
// context-parallel group `cp` (of mb.cp_size ranks; every rank of it must call). Without
// context parallelism, `local`.
absl::StatusOr<std::vector<float>> GatherMicroBatchRows(const MicroBatchContext& mb,
                                                        Communicator& cp,
                                                        absl::Span<const float> local,
                                                        int64_t width);

// This rank's rows of a micro-batch's [batch * seq, width] array (the inverse):
// local row r is the micro-batch's row GlobalRow(mb, r).
template <typename T>
std::vector<T> LocalRowsOfWidth(const MicroBatchContext& mb, absl::Span<const T> full,
                                int64_t width) {
  std::vector<T> local(mb.tokens() * width);
  for (int64_t r = 0; r < mb.tokens(); ++r) {
    const T* row = full.data() + GlobalRow(mb, r) * width;
    std::copy(row, row + width, local.begin() + r * width);
  }
  return local;
}

}  // namespace conveyor

#endif  // CONVEYOR_MODEL_CONTEXT_ROWS_H_
