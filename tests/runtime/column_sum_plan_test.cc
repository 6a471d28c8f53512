// How column sums split into blocks (runtime/cuda/column_sum_plan.h): host arithmetic,
// checked on the CPU, since the kernels that follow it cover exactly the chunks it names.
#include "runtime/cuda/column_sum_plan.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace conveyor::cuda {
namespace {

TEST(ColumnSumPlanTest, ChunksCoverEveryRowOnceAndFitTheGrid) {
  for (const int64_t rows : {1, 7, 255, 256, 257, 1000, 4096, 16384, 100000, 3000000}) {
    for (const int64_t width : {1, 31, 32, 33, 96, 768, 2048, 50304}) {
      const ColumnSumPlan plan = PlanColumnSum(rows, width);
      EXPECT_EQ(plan.column_blocks, (width + 31) / 32) << rows << "x" << width;
      EXPECT_GE(plan.chunks, 1);
      EXPECT_LE(plan.chunks, 65535);  // grid y
      // Chunk y covers rows [y * rows_per_chunk, min(rows, (y + 1) * rows_per_chunk)):
      // every chunk holds a row, and together they hold all of them.
      EXPECT_LT((plan.chunks - 1) * plan.rows_per_chunk, rows) << rows << "x" << width;
      EXPECT_GE(plan.chunks * plan.rows_per_chunk, rows) << rows << "x" << width;
      if (plan.chunks > 1) {
        EXPECT_GE(plan.rows_per_chunk, kMinRowsPerChunk - 1) << rows << "x" << width;
        EXPECT_EQ(plan.scratch_bytes(width), plan.chunks * width * 8);
      } else {
        EXPECT_EQ(plan.scratch_bytes(width), 0);
      }
    }
  }
}

TEST(ColumnSumPlanTest, NarrowMatricesFillTheGpu) {
  // GPT-2 124M's norm gradients: 16 x 1024 tokens of width 768 made 24 blocks before.
  const ColumnSumPlan gpt2 = PlanColumnSum(16 * 1024, 768);
  EXPECT_EQ(gpt2.column_blocks, 24);
  EXPECT_GE(gpt2.column_blocks * gpt2.chunks, 1000);
  // A short matrix stays one chunk: nothing to split.
  EXPECT_EQ(PlanColumnSum(300, 1000).chunks, 1);
}

}  // namespace
}  // namespace conveyor::cuda
