#include "model/micro_batch.h"

#include "model/context_shard.h"

namespace conveyor {

std::vector<int32_t> RowPositions(const MicroBatchContext& mb, int64_t first_row, int64_t rows) {
  std::vector<int32_t> positions(rows);
  const bool reset = mb.documents != nullptr && !mb.documents->position_ids.empty();
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t row = GlobalRow(mb, first_row + r);  // in the micro-batch's [batch * seq]
    positions[r] = reset ? mb.documents->position_ids[row] : static_cast<int32_t>(row % mb.seq);
  }
  return positions;
}

}  // namespace conveyor
