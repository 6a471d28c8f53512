// Expert tensor parallelism narrower than tensor parallelism (--expert-tensor-parallel-size
// ETP < TP). Every rank of a tensor-parallel group holds the micro-batch's dispatched rows
// (expert-major), but an expert is split over only ETP of them, so the group's TP/ETP
// sub-groups of ETP consecutive ranks (copies of the same expert shards, or of other
// experts' under expert parallelism) share the rows: sub-group j runs part j of P = TP/ETP
// contiguous parts of every expert's rows and leaves the other rows' outputs zero. The
// tensor-parallel region then sums the ranks' partial outputs as it does for TP-sharded
// experts, which adds each row's output once. (Megatron keeps each TP rank's sequence
// shard instead; the sum is the same, and here routing and capacity stay those of the
// whole micro-batch.)
#ifndef CONVEYOR_MODEL_EXPERT_ROW_SHARE_H_
#define CONVEYOR_MODEL_EXPERT_ROW_SHARE_H_

#include <cstdint>
#include <vector>

namespace conveyor {

struct RowShare {
  std::vector<int32_t> rows;          // the share's rows, as indices into all rows, in order
  std::vector<int64_t> expert_begin;  // [E + 1]: each expert's first row within the share
  std::vector<int32_t> place;         // [all rows]: a row's index in the share, else -1
};

// Part `part` of `parts` of each expert's rows: of expert e's n_e rows (all rows'
// `expert_begin`, [E + 1]), rows [n_e * part / parts, n_e * (part + 1) / parts).
RowShare ShareOfRows(const std::vector<int64_t>& expert_begin, int parts, int part);

}  // namespace conveyor

#endif  // CONVEYOR_MODEL_EXPERT_ROW_SHARE_H_
