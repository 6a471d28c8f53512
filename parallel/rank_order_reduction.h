// The arithmetic of the deterministic reductions (communicator.h), shared by every
// backend that reduces on the host: for each element, the contributions of ranks
// 0, 1, 2, ... are combined in that order, so the bits depend on the inputs alone.
#ifndef CONVEYOR_PARALLEL_RANK_ORDER_REDUCTION_H_
#define CONVEYOR_PARALLEL_RANK_ORDER_REDUCTION_H_

#include <cstdint>

#include "parallel/buffer.h"

namespace conveyor {

enum class Reduction { kSum, kMax };

// out[i] = ((part_0[i] op part_1[i]) op part_2[i]) op ... over `num_parts` parts of `n`
// elements each, stored one after another at `parts`. fp32 and fp64 combine in their own
// type; bf16 sums in fp32 and rounds to bf16 once, at the end (round to nearest, ties to
// even), as a widened fp32 sum rounded back would. kMax is for fp64; a NaN anywhere
// makes the result NaN. `out` must not overlap `parts`.
void ReduceInRankOrder(Reduction op, DType type, const void* parts, int num_parts, int64_t n,
                       void* out);

}  // namespace conveyor

#endif  // CONVEYOR_PARALLEL_RANK_ORDER_REDUCTION_H_
