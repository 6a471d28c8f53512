// The small products of the CPU attention's tiles (runtime/cpu/attention.cc): a tile of
// query rows against the keys it sees, head dims of 32-256, so k and n are small and a
// library GEMM spends much of each call packing. On CPUs with AVX-512 they run through a
// register-blocked micro-kernel of our own that reads the operands where they lie (no
// packing: a row of B is one contiguous run, A is read one element at a time); elsewhere
// through the BLAS.
#ifndef CONVEYOR_RUNTIME_CPU_ATTENTION_TILES_H_
#define CONVEYOR_RUNTIME_CPU_ATTENTION_TILES_H_

#include <cstdint>

namespace conveyor::cpu {

// C = alpha * A B (+ C when `accumulate`), A [m, k], B [k, n], C [m, n], where
//   A(i, kk) = a[i * a_row_stride + kk * a_col_stride]  (one of the strides is 1: A or A^T
//              stored row-major),
//   B(kk, j) = b[kk * ldb + j],  C(i, j) = c[i * ldc + j].
struct TileProduct {
  int64_t m, n, k;
  float alpha;
  const float* a;
  int64_t a_row_stride, a_col_stride;
  const float* b;
  int64_t ldb;
  float* c;
  int64_t ldc;
  bool accumulate;
};

enum class TileKernel { kAvx512, kBlas };

// kAvx512 where the CPU has AVX-512F, else kBlas.
TileKernel BestTileKernel();

// The product through `kernel` (kAvx512 only where the CPU has it). The two differ only
// in the order of each sum's roundings.
void TileGemm(TileKernel kernel, const TileProduct& p);
inline void TileGemm(const TileProduct& p) { TileGemm(BestTileKernel(), p); }

// out[c * ld_out + r] = in[r * ld + c] for r < rows, c < cols (ld_out >= rows; the
// rest of out's rows untouched): a head's keys (or values) as the [head_dim, keys] B
// operand of Q K^T (dO V^T). kAvx512 only where the CPU has it.
void TransposeRows(TileKernel kernel, int64_t rows, int64_t cols, const float* in, int64_t ld,
                   float* out, int64_t ld_out);
inline void TransposeRows(int64_t rows, int64_t cols, const float* in, int64_t ld, float* out,
                          int64_t ld_out) {
  TransposeRows(BestTileKernel(), rows, cols, in, ld, out, ld_out);
}

}  // namespace conveyor::cpu

#endif  // CONVEYOR_RUNTIME_CPU_ATTENTION_TILES_H_
