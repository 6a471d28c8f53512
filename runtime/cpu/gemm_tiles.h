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
#include <memory>
#include <new>

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

// The most bytes of packed op(B) a packed GEMM holds at once. Up to it, op(B) is packed
// once per call and every tile reuses it; past it (a large vocabulary's output layer
// would pack gigabytes: [hidden, 128K] in fp32 is 2 GiB at hidden 4096), op(B) is packed
// one group of panels at a time, and each group reads all of A again.
inline constexpr int64_t kMaxPackedBBytes = int64_t{8} << 20;

// A GEMM over C's columns [col, col + cols), whose finished tiles go to `epilogue` (tile
// columns counted from `col`).
using GemmColumns = absl::FunctionRef<void(int64_t col, int64_t cols,
                                           absl::FunctionRef<void(const GemmTile&)> epilogue)>;

// Runs a GEMM of n columns, in panels of panel_cols packing to panel_bytes each, as
// consecutive groups of panels, in order, each as many as fit kMaxPackedBBytes (one at
// least): gemm(col, cols, group_epilogue) for each, where group_epilogue hands each tile
// to `epilogue` with its column counted in the whole of C.
void ForEachPackedGroup(int64_t n, int64_t panel_cols, int64_t panel_bytes,
                        absl::FunctionRef<void(const GemmTile&)> epilogue, GemmColumns gemm);

// A thread's scratch for the packed GEMMs (packed panels, partial sums), kept between
// calls: grown when a call needs more, never shrunk or cleared, and 64-byte aligned, so
// that the kernels' full-vector loads of a packed panel each stay within one cache line
// (std::vector's 16-byte alignment split every such load across two).
template <typename T>
class GemmScratch {
 public:
  // Room for n elements at least.
  T* GrownTo(int64_t n) {
    if (n > capacity_) {
      data_.reset(static_cast<T*>(::operator new(n * sizeof(T), kAlignment)));
      capacity_ = n;
    }
    return data_.get();
  }

 private:
  static constexpr std::align_val_t kAlignment{64};
  struct Release {
    void operator()(T* p) const { ::operator delete(p, kAlignment); }
  };
  std::unique_ptr<T, Release> data_;
  int64_t capacity_ = 0;
};

}  // namespace conveyor::cpu

#endif  // CONVEYOR_RUNTIME_CPU_GEMM_TILES_H_
