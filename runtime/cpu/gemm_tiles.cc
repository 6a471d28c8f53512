#include "runtime/cpu/gemm_tiles.h"

#include <algorithm>

#include "runtime/cpu/thread_pool.h"

namespace conveyor::cpu {

// Tiles per thread: with eight, the last tile to finish leaves the other threads idle for
// about an eighth of a thread's share at most (each tile is a task of its own, taken in
// turn by the next free thread: ParallelForEach).
constexpr int64_t kTilesPerThread = 8;

void ForEachGemmTile(int64_t m, int64_t panels, int64_t rows_per_block, int64_t max_panels,
                     absl::FunctionRef<void(const GemmTileRange&)> fn) {
  if (m <= 0 || panels <= 0) return;
  const int64_t row_blocks = (m + rows_per_block - 1) / rows_per_block;
  const int64_t wanted = kTilesPerThread * PoolThreads();
  const int64_t col_tiles = std::min(panels, std::max((panels + max_panels - 1) / max_panels,
                                                      (wanted + row_blocks - 1) / row_blocks));
  const int64_t panels_per_tile = (panels + col_tiles - 1) / col_tiles;
  ParallelForEach(row_blocks * col_tiles, [&](int64_t t) {
    const int64_t i0 = (t / col_tiles) * rows_per_block, j0 = (t % col_tiles) * panels_per_tile;
    const GemmTileRange range{i0, std::min(m, i0 + rows_per_block), j0,
                              std::min(panels, j0 + panels_per_tile)};
    if (range.j0 < range.j1) fn(range);
  });
}

void ForEachPackedGroup(int64_t n, int64_t panel_cols, int64_t panel_bytes,
                        absl::FunctionRef<void(const GemmTile&)> epilogue, GemmColumns gemm) {
  const int64_t per_group =
      std::max<int64_t>(1, kMaxPackedBBytes / std::max<int64_t>(panel_bytes, 1));
  const int64_t group_cols = per_group * panel_cols;
  for (int64_t col = 0; col < n; col += group_cols) {
    gemm(col, std::min(group_cols, n - col), [&](const GemmTile& tile) {
      GemmTile in_c = tile;
      in_c.col += col;
      epilogue(in_c);
    });
  }
}

}  // namespace conveyor::cpu
