#include "model/context_shard.h"

#include <algorithm>

namespace conveyor {

int64_t SamplePosition(const MicroBatchContext& mb, int cp_rank, int64_t i) {
  const int cp = mb.cp_size;
  if (cp == 1) return i;
  const int64_t chunk = mb.seq / (2 * cp);
  const int64_t which = i < chunk ? cp_rank : 2 * cp - 1 - cp_rank;
  return which * chunk + i % chunk;
}

std::vector<int32_t> SamplePositions(const MicroBatchContext& mb, int cp_rank) {
  std::vector<int32_t> positions(mb.local_seq());
  for (int64_t i = 0; i < mb.local_seq(); ++i) {
    positions[i] = static_cast<int32_t>(SamplePosition(mb, cp_rank, i));
  }
  return positions;
}

int64_t GlobalRow(const MicroBatchContext& mb, int64_t local_row) {
  const int64_t sample = local_row / mb.local_seq();
  return sample * mb.seq + SamplePosition(mb, mb.cp_rank, local_row % mb.local_seq());
}

std::vector<RowRun> RowRuns(const MicroBatchContext& mb, int64_t first, int64_t rows) {
  if (mb.cp_size == 1) return {{first, rows, first}};  // every row in order
  std::vector<RowRun> runs;
  for (int64_t r = first; r < first + rows; ++r) {
    const int64_t global = GlobalRow(mb, r);
    if (!runs.empty() && runs.back().global + runs.back().rows == global) {
      ++runs.back().rows;
    } else {
      runs.push_back({r, 1, global});
    }
  }
  return runs;
}

Tensor RunRows(const Tensor& t, const RowRun& run, int64_t first) {
  const int64_t width = t.dim(1);
  return t.View((run.first - first) * width, {run.rows, width});
}

uint64_t DropoutIndex(const MicroBatchContext& mb, const RowRun& run, int64_t width) {
  return static_cast<uint64_t>((mb.first_sample * mb.seq + run.global) * width);
}

void DropoutRows(const Ops& ops, const CounterRng& rng, float p, const MicroBatchContext& mb,
                 int64_t first, const Tensor& in, Tensor* out) {
  for (const RowRun& run : RowRuns(mb, first, in.dim(0))) {
    Tensor out_rows = RunRows(*out, run, first);
    ops.Dropout(rng, p, DropoutIndex(mb, run, in.dim(1)), RunRows(in, run, first), &out_rows);
  }
}

}  // namespace conveyor
