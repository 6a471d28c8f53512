// How the CUDA backend splits deterministic column sums of a [rows, width] matrix (norm
// weight gradients, bias gradients) into blocks: 32 columns per block along grid x, and
// along grid y chunks of rows, so that a narrow matrix still fills the GPU (hidden 768
// makes only 24 blocks of columns, against an H200's 132 SMs). Each chunk's sums go to a
// scratch buffer [chunks, width] of float pairs, which a second pass adds in chunk order.
// The split depends on (rows, width) alone, so a result repeats from run to run.
#ifndef CONVEYOR_RUNTIME_CUDA_COLUMN_SUM_PLAN_H_
#define CONVEYOR_RUNTIME_CUDA_COLUMN_SUM_PLAN_H_

#include <algorithm>
#include <cstdint>

namespace conveyor::cuda {

struct ColumnSumPlan {
  int64_t column_blocks = 1;
  int64_t chunks = 1;
  int64_t rows_per_chunk = 1;
  // Scratch for the chunks' sums (two floats per column); none for one chunk, which adds
  // into the outputs directly.
  int64_t scratch_bytes(int64_t width) const {
    return chunks == 1 ? 0 : chunks * width * 2 * static_cast<int64_t>(sizeof(float));
  }
};

// About this many blocks in all (a few waves on 132 SMs), and chunks of at least
// kMinRowsPerChunk rows, so that each block's loop amortises its start and the scratch
// stays small.
inline constexpr int64_t kColumnSumTargetBlocks = 1024;
inline constexpr int64_t kMinRowsPerChunk = 256;

inline ColumnSumPlan PlanColumnSum(int64_t rows, int64_t width) {
  ColumnSumPlan plan;
  plan.column_blocks = std::max<int64_t>(1, (width + 31) / 32);
  const int64_t wanted = (kColumnSumTargetBlocks + plan.column_blocks - 1) / plan.column_blocks;
  const int64_t most = std::max<int64_t>(1, rows / kMinRowsPerChunk);
  const int64_t chunks = std::max<int64_t>(1, std::min(wanted, most));
  plan.rows_per_chunk = std::max<int64_t>(1, (rows + chunks - 1) / chunks);
  plan.chunks = std::max<int64_t>(1, (rows + plan.rows_per_chunk - 1) / plan.rows_per_chunk);
  return plan;
}

}  // namespace conveyor::cuda

#endif  // CONVEYOR_RUNTIME_CUDA_COLUMN_SUM_PLAN_H_
