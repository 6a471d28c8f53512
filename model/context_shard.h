// Which tokens of a micro-batch this rank holds under context parallelism
// (--context-parallel-size CP; Megatron's load balancing for causal attention): each
// sample is cut into 2 * CP chunks of seq / (2 CP) tokens and CP rank r holds chunks r
// and 2 CP - 1 - r, an early chunk (whose queries see few keys) with a late one (whose
// queries see many), so every rank does the same share of the causal mask's work. A
// rank's rows are its local_seq() tokens of sample 0, then of sample 1, ...; without
// context parallelism, every token in order.
//
// Everything drawn or looked up by position (dropout masks, RoPE and learned positions,
// labels, document masks) goes through these functions, so a layout never changes the
// math (docs/design.md §3).
#ifndef CONVEYOR_MODEL_CONTEXT_SHARD_H_
#define CONVEYOR_MODEL_CONTEXT_SHARD_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "model/micro_batch.h"
#include "runtime/ops.h"
#include "runtime/philox.h"
#include "runtime/tensor.h"

namespace conveyor {

// Position in the sample of local token i (0 <= i < mb.local_seq()) of CP rank cp_rank.
int64_t SamplePosition(const MicroBatchContext& mb, int cp_rank, int64_t i);
// The positions of CP rank cp_rank's local tokens of one sample, [local_seq].
std::vector<int32_t> SamplePositions(const MicroBatchContext& mb, int cp_rank);
// Index in the micro-batch's [batch * seq] tokens of this rank's local row r.
int64_t GlobalRow(const MicroBatchContext& mb, int64_t local_row);

// This rank's rows of a [batch * seq] array (tokens, labels, document masks).
template <typename T>
std::vector<T> LocalRows(const MicroBatchContext& mb, absl::Span<const T> full) {
  if (full.empty()) return {};
  std::vector<T> local(mb.tokens());
  for (int64_t r = 0; r < mb.tokens(); ++r) local[r] = full[GlobalRow(mb, r)];
  return local;
}

// Local rows [first, first + rows) as runs of rows consecutive in the micro-batch:
// `first` local row, `rows` of them, starting at global row `global`.
struct RowRun {
  int64_t first = 0;
  int64_t rows = 0;
  int64_t global = 0;
};
std::vector<RowRun> RowRuns(const MicroBatchContext& mb, int64_t first, int64_t rows);

// The run's rows of t ([rows, width] of the rank's rows from `first`): a view.
Tensor RunRows(const Tensor& t, const RowRun& run, int64_t first);

// The global index of the run's first element in the micro-batch's hidden dropout
// masks over [batch * seq, width] (keyed by sample index within the step).
uint64_t DropoutIndex(const MicroBatchContext& mb, const RowRun& run, int64_t width);

// out = Dropout(in) over this rank's rows from local row `first` ([rows, width]; in and
// out may be one tensor), each row masked by its row in the micro-batch: one Ops::Dropout
// per run of consecutive rows.
void DropoutRows(const Ops& ops, const CounterRng& rng, float p, const MicroBatchContext& mb,
                 int64_t first, const Tensor& in, Tensor* out);

}  // namespace conveyor

#endif  // CONVEYOR_MODEL_CONTEXT_SHARD_H_
