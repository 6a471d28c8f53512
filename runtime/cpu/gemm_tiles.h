// How Conveyor's packed CPU GEMMs (runtime/cpu/f32_gemm.h, bf16_gemm.h) split C among the
// pool's threads, and the tile of C they hand to a caller's epilogue.
//
// Both follow Goto and van de Geijn ("Anatomy of high-performance matrix multiplication",
// ACM TOMS 34(3), 2008): op(B) is packed once into panels of a few vectors' width, and C
// is cut into tiles of a block of rows (whose A stays in L2) by a run of panels. Each tile
// is one thread's from the first block of k to the last, so every element of C is summed
// in one fixed order whatever the number of threads.
#ifndef CONVEYOR_RUNTIME_CPU_GEMM_TILES_H_
#define CONVEYOR_RUNTIME_CPU_GEMM_TILES_H_

#include <cstdint>
#include <vector>

#include "absl/functional/function_ref.h"

namespace conveyor::cpu {

// One finished tile of C: rows [row, row + rows), columns [col, col + cols), element
// (i, j) of the tile at values[i * ld + j]. An epilogue may overwrite it.
struct GemmTile {
  int64_t row, col, rows, cols;
  float* values;
  int64_t ld;
};

// Rows [i0, i1) of C by panels [j0, j1) of B.
struct GemmTileRange {
  int64_t i0, i1, j0, j1;
};

// Calls fn once for each tile of C [m, panels panels], on the pool's threads: blocks of
// rows_per_block rows, each cut into runs of at most max_panels panels, and into shorter
// runs when there are too few tiles to keep every thread busy to the end.
void ForEachGemmTile(int64_t m, int64_t panels, int64_t rows_per_block, int64_t max_panels,
                     absl::FunctionRef<void(const GemmTileRange&)> fn);

// buffer's data, grown to hold n elements at least and never shrunk: the GEMMs' scratch
// (packed panels, partial sums) is a thread_local vector per kind, and a resize down then
// up would clear the regrown part, a memset on every call after a smaller one.
template <typename T>
T* GrownTo(std::vector<T>& buffer, int64_t n) {
  if (static_cast<int64_t>(buffer.size()) < n) buffer.resize(n);
  return buffer.data();
}

}  // namespace conveyor::cpu

#endif  // CONVEYOR_RUNTIME_CPU_GEMM_TILES_H_
