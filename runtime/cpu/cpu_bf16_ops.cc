#include "runtime/cpu/cpu_bf16_ops.h"

#include "absl/functional/function_ref.h"
#include "runtime/cpu/activation.h"
#include "runtime/cpu/bf16_convert.h"
#include "runtime/cpu/bf16_gemm.h"
#include "runtime/cpu/bf16_row_chunks.h"
#include "runtime/cpu/cpu_ops.h"

namespace conveyor {
namespace {

bool Bf16(const Tensor& t) { return t.dtype() == DType::kBFloat16; }
const BFloat16* Bits(const Tensor& t) { return static_cast<const BFloat16*>(t.raw()); }
BFloat16* Bits(Tensor* t) { return static_cast<BFloat16*>(t->raw()); }

// fn(sums, at) for each row of a GEMM's tile: `sums` its fp32 values, `at` the offset of
// its first element in the [m, ldc] output.
void ForTileRows(const cpu::GemmTile& tile, int64_t ldc,
                 absl::FunctionRef<void(float*, int64_t)> fn) {
  for (int64_t i = 0; i < tile.rows; ++i) {
    fn(tile.values + i * tile.ld, (tile.row + i) * ldc + tile.col);
  }
}

// A tile row's sums += the bias over its columns.
void AddTileBias(const float* bias, const cpu::GemmTile& tile, float* sums) {
  if (bias == nullptr) return;
  for (int64_t j = 0; j < tile.cols; ++j) sums[j] += bias[tile.col + j];
}

const float* BiasData(const Tensor* bias) { return bias != nullptr ? bias->data() : nullptr; }

}  // namespace

CpuBf16Ops::CpuBf16Ops() : Bf16EmulationOps(&CpuOps::Get()) {}

const CpuBf16Ops& CpuBf16Ops::Get() {
  static const CpuBf16Ops* ops = new CpuBf16Ops();
  return *ops;
}

void CpuBf16Ops::Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                      const Tensor& a, const Tensor& b, float beta, Tensor* c) const {
  if (!Bf16(a) || !Bf16(b)) {
    Bf16EmulationOps::Gemm(trans_a, trans_b, m, n, k, alpha, a, b, beta, c);
    return;
  }
  const int64_t lda = trans_a ? m : k, ldb = trans_b ? k : n;
  if (!Bf16(*c)) {
    cpu::Bf16Gemm(trans_a, trans_b, m, n, k, alpha, Bits(a), lda, Bits(b), ldb, beta, c->data(), n);
    return;
  }
  // A bf16 output: alpha * (the fp32 sum) + beta * c in fp32, then one rounding to bf16,
  // tile by tile.
  BFloat16* out = Bits(c);
  cpu::GemmTiles(trans_a, trans_b, m, n, k, alpha, Bits(a), lda, Bits(b), ldb,
                     [&](const cpu::GemmTile& tile) {
                       ForTileRows(tile, n, [&](float* sums, int64_t at) {
                         if (beta != 0.0f) {
                           const float* old = cpu::WideRows(out + at, tile.cols, 0, 1, 0);
                           for (int64_t j = 0; j < tile.cols; ++j) sums[j] += beta * old[j];
                         }
                         cpu::RoundToBf16(sums, tile.cols, out + at);
                       });
                     });
}

bool CpuBf16Ops::Fusable(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& out) {
  return Bf16(x) && Bf16(w) && Bf16(out) && (bias == nullptr || !Bf16(*bias));
}

// y = bf16(x w^T + bias): the bias is added to the fp32 sums, one rounding per element
// (the emulation rounds the product, then the sum).
void CpuBf16Ops::LinearForward(const Tensor& x, const Tensor& w, const Tensor* bias,
                               Tensor* y) const {
  if (!Fusable(x, w, bias, *y)) return Bf16EmulationOps::LinearForward(x, w, bias, y);
  const int64_t rows = x.dim(0), out = w.dim(0), in = w.dim(1);
  cpu::GemmTiles(false, true, rows, out, in, 1.0f, Bits(x), in, Bits(w), in,
                     [&](const cpu::GemmTile& tile) {
                       ForTileRows(tile, out, [&](float* sums, int64_t at) {
                         AddTileBias(BiasData(bias), tile, sums);
                         cpu::RoundToBf16(sums, tile.cols, Bits(y) + at);
                       });
                     });
}

// pre = bf16(x w^T + bias), y = bf16(GELU(pre)): GELU reads pre as stored, the value
// its backward reads.
void CpuBf16Ops::LinearGeluForward(const Tensor& x, const Tensor& w, const Tensor* bias,
                                   Tensor* pre, Tensor* y) const {
  if (!Fusable(x, w, bias, *pre) || !Bf16(*y)) {
    return Bf16EmulationOps::LinearGeluForward(x, w, bias, pre, y);
  }
  const int64_t rows = x.dim(0), out = w.dim(0), in = w.dim(1);
  cpu::GemmTiles(false, true, rows, out, in, 1.0f, Bits(x), in, Bits(w), in,
                     [&](const cpu::GemmTile& tile) {
                       ForTileRows(tile, out, [&](float* sums, int64_t at) {
                         AddTileBias(BiasData(bias), tile, sums);
                         cpu::RoundToBf16(sums, tile.cols, Bits(pre) + at);
                         const float* stored = cpu::WideRows(Bits(*pre) + at, tile.cols, 0, 1, 0);
                         float* gelu = cpu::ChunkBuffer(1, tile.cols);
                         cpu::GeluForward(stored, tile.cols, gelu);
                         cpu::RoundToBf16(gelu, tile.cols, Bits(y) + at);
                       });
                     });
}

// dx = bf16(GELU'(pre) * (dy w)), the derivative applied to the fp32 sums.
void CpuBf16Ops::LinearGeluBackwardInput(const Tensor& dy, const Tensor& w, const Tensor& pre,
                                         Tensor* dx) const {
  if (!Fusable(dy, w, nullptr, *dx) || !Bf16(pre)) {
    return Bf16EmulationOps::LinearGeluBackwardInput(dy, w, pre, dx);
  }
  const int64_t rows = dy.dim(0), out = w.dim(0), in = w.dim(1);
  cpu::GemmTiles(false, false, rows, in, out, 1.0f, Bits(dy), out, Bits(w), in,
                     [&](const cpu::GemmTile& tile) {
                       ForTileRows(tile, in, [&](float* sums, int64_t at) {
                         const float* p = cpu::WideRows(Bits(pre) + at, tile.cols, 0, 1, 0);
                         cpu::GeluBackward(p, sums, tile.cols, sums);
                         cpu::RoundToBf16(sums, tile.cols, Bits(dx) + at);
                       });
                     });
}

}  // namespace conveyor
