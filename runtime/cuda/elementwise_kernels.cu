#include "runtime/cuda/device_math.h"
#include "runtime/cuda/elementwise_kernels.h"

namespace conveyor::cuda {
namespace {

// y = y + x
template <typename T>
__global__ void AddKernel(const T* __restrict__ x, T* __restrict__ y, int64_t n) {
  CONVEYOR_GRID_STRIDE(i, n) { Store(&y[i], Load(&y[i]) + Load(&x[i])); }
}

// y = beta * y
template <typename T>
__global__ void ScaleKernel(float beta, T* __restrict__ y, int64_t n) {
  CONVEYOR_GRID_STRIDE(i, n) { Store(&y[i], beta * Load(&y[i])); }
}

// y[r, c] = y[r, c] + bias[c]; blocks stride over rows, threads over columns, so no
// element needs a 64-bit division to find its column.
template <typename T, typename W>
__global__ void AddBiasKernel(const W* __restrict__ bias, int64_t rows, int64_t width,
                              T* __restrict__ y) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    T* row = y + r * width;
    for (int64_t c = threadIdx.x; c < width; c += blockDim.x) {
      Store(&row[c], Load(&row[c]) + Load(&bias[c]));
    }
  }
}

// dbias[c] = dbias[c] + sum_r dy[r, c]
template <typename T>
__global__ void BiasGradKernel(const T* __restrict__ dy, int64_t rows, int64_t rows_per_chunk,
                               int64_t width, float2* __restrict__ partials,
                               float* __restrict__ dbias) {
  ColumnSum(
      rows, rows_per_chunk, width,
      [&](int64_t r, int64_t c) { return make_float2(Load(&dy[r * width + c]), 0.0f); }, partials,
      dbias, nullptr);
}

// x[r, c] = x[r, c] + table[positions[r], c]
template <typename T, typename W>
__global__ void AddPositionRowsKernel(const W* __restrict__ table,
                                      const int32_t* __restrict__ positions, int64_t rows,
                                      int64_t width, T* __restrict__ x) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const W* pos = table + static_cast<int64_t>(positions[r]) * width;
    T* row = x + r * width;
    for (int64_t c = threadIdx.x; c < width; c += blockDim.x) {
      Store(&row[c], Load(&row[c]) + Load(&pos[c]));
    }
  }
}

}  // namespace

void LaunchAdd(DType dtype, const void* x, void* y, int64_t n) {
  if (n <= 0) return;
  Dispatch(dtype, [&](auto t) {
    using T = typename decltype(t)::type;
    AddKernel<<<ElementwiseBlocks(n), kThreads>>>(static_cast<const T*>(x), static_cast<T*>(y), n);
  });
  CUDA_CHECK_LAUNCH("AddKernel");
}

void LaunchScale(DType dtype, float beta, void* y, int64_t n) {
  if (n <= 0) return;
  Dispatch(dtype, [&](auto t) {
    using T = typename decltype(t)::type;
    ScaleKernel<<<ElementwiseBlocks(n), kThreads>>>(beta, static_cast<T*>(y), n);
  });
  CUDA_CHECK_LAUNCH("ScaleKernel");
}

void LaunchAddBias(DType y_dtype, DType bias_dtype, const void* bias, int64_t rows, int64_t width,
                   void* y) {
  if (rows <= 0 || width <= 0) return;
  Dispatch2(y_dtype, bias_dtype, [&](auto t, auto w) {
    using T = typename decltype(t)::type;
    using W = typename decltype(w)::type;
    AddBiasKernel<<<RowLoopBlocks(rows), RowThreads(width)>>>(static_cast<const W*>(bias), rows,
                                                              width, static_cast<T*>(y));
  });
  CUDA_CHECK_LAUNCH("AddBiasKernel");
}

void LaunchAccumulateBiasGrad(DType dy_dtype, const void* dy, int64_t rows, int64_t width,
                              void* scratch, float* dbias) {
  if (rows <= 0 || width <= 0) return;
  const ColumnSumPlan plan = PlanColumnSum(rows, width);
  auto* partials = static_cast<float2*>(scratch);
  Dispatch(dy_dtype, [&](auto t) {
    using T = typename decltype(t)::type;
    BiasGradKernel<<<ColumnSumGrid(plan), ColumnSumBlock()>>>(
        static_cast<const T*>(dy), rows, plan.rows_per_chunk, width, partials, dbias);
  });
  CUDA_CHECK_LAUNCH("BiasGradKernel");
  FinishColumnSum(plan, width, partials, dbias, nullptr);
}

void LaunchAddPositionRows(DType x_dtype, DType table_dtype, const void* table,
                           const int32_t* positions, int64_t rows, int64_t width, void* x) {
  if (rows <= 0 || width <= 0) return;
  Dispatch2(x_dtype, table_dtype, [&](auto t, auto w) {
    using T = typename decltype(t)::type;
    using W = typename decltype(w)::type;
    AddPositionRowsKernel<<<RowLoopBlocks(rows), RowThreads(width)>>>(
        static_cast<const W*>(table), positions, rows, width, static_cast<T*>(x));
  });
  CUDA_CHECK_LAUNCH("AddPositionRowsKernel");
}

}  // namespace conveyor::cuda
