#include "runtime/cuda/device_math.h"
#include "runtime/cuda/norm_kernels.h"

namespace conveyor::cuda {
namespace {

// One block per row r (blocks stride over rows), fp32 statistics by block reduction:
//   LayerNorm: mean = sum(x) / width,  var = sum((x - mean)^2) / width
//   RMSNorm:   mean = 0,               var = sum(x^2) / width
//   rstd = 1 / sqrt(var + eps),  y = (x - mean) rstd gamma + beta
// The two passes re-read the row, which the first pass left in L1/L2: the variance is
// taken about the mean, never as E[x^2] - mean^2 (which cancels catastrophically).
template <typename T, typename W>
__global__ void NormForwardKernel(bool layer_norm, const T* __restrict__ x,
                                  const W* __restrict__ gamma, const W* __restrict__ beta,
                                  int64_t rows, int64_t width, float eps, T* __restrict__ y,
                                  float* __restrict__ mean, float* __restrict__ rstd) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * width;
    float mu = 0.0f;
    if (layer_norm) {
      float sum = 0.0f;
      for (int64_t i = threadIdx.x; i < width; i += blockDim.x) sum += Load(&xr[i]);
      mu = BlockSum(sum) / static_cast<float>(width);
    }
    float sum_sq = 0.0f;
    for (int64_t i = threadIdx.x; i < width; i += blockDim.x) {
      const float d = Load(&xr[i]) - mu;
      sum_sq += d * d;
    }
    const float var = BlockSum(sum_sq) / static_cast<float>(width);
    const float rs = 1.0f / sqrtf(var + eps);
    if (threadIdx.x == 0) {
      mean[r] = mu;
      rstd[r] = rs;
    }
    T* yr = y + r * width;
    for (int64_t i = threadIdx.x; i < width; i += blockDim.x) {
      const float xhat = (Load(&xr[i]) - mu) * rs;
      Store(&yr[i], xhat * Load(&gamma[i]) + (beta != nullptr ? Load(&beta[i]) : 0.0f));
    }
  }
}

// One block per row, with xhat = (x - mean) rstd and g = dy gamma:
//   LayerNorm: dx = rstd (g - mean(g) - xhat mean(g xhat))
//   RMSNorm:   dx = rstd (g - xhat mean(g xhat))
template <typename T, typename W>
__global__ void NormBackwardInputKernel(bool layer_norm, const T* __restrict__ dy,
                                        const T* __restrict__ x, const W* __restrict__ gamma,
                                        const float* __restrict__ mean,
                                        const float* __restrict__ rstd, int64_t rows, int64_t width,
                                        T* __restrict__ dx) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* dyr = dy + r * width;
    const T* xr = x + r * width;
    const float mu = mean[r], rs = rstd[r];
    float sum_g = 0.0f, sum_g_xhat = 0.0f;
    for (int64_t i = threadIdx.x; i < width; i += blockDim.x) {
      const float g = Load(&dyr[i]) * Load(&gamma[i]);
      sum_g += g;
      sum_g_xhat += g * ((Load(&xr[i]) - mu) * rs);
    }
    const float inv_width = 1.0f / static_cast<float>(width);
    const float mean_g = layer_norm ? BlockSum(sum_g) * inv_width : 0.0f;
    const float mean_g_xhat = BlockSum(sum_g_xhat) * inv_width;
    T* dxr = dx + r * width;
    for (int64_t i = threadIdx.x; i < width; i += blockDim.x) {
      const float xhat = (Load(&xr[i]) - mu) * rs;
      Store(&dxr[i], rs * (Load(&dyr[i]) * Load(&gamma[i]) - mean_g - xhat * mean_g_xhat));
    }
  }
}

// dgamma[c] += sum_r dy[r, c] xhat[r, c],  dbeta[c] += sum_r dy[r, c]
template <typename T>
__global__ void NormBackwardWeightKernel(const T* __restrict__ dy, const T* __restrict__ x,
                                         const float* __restrict__ mean,
                                         const float* __restrict__ rstd, int64_t rows,
                                         int64_t rows_per_chunk, int64_t width,
                                         float2* __restrict__ partials, float* __restrict__ dgamma,
                                         float* __restrict__ dbeta) {
  ColumnSum(
      rows, rows_per_chunk, width,
      [&](int64_t r, int64_t c) {
        const float g = Load(&dy[r * width + c]);
        return make_float2(g * ((Load(&x[r * width + c]) - mean[r]) * rstd[r]), g);
      },
      partials, dgamma, dbeta);
}

unsigned int NormBlocks(int64_t rows) {
  return static_cast<unsigned int>(std::max<int64_t>(1, std::min<int64_t>(rows, kMaxBlocks)));
}

}  // namespace

void LaunchNormForward(bool layer_norm, DType x_dtype, DType weight_dtype, const void* x,
                       const void* gamma, const void* beta, int64_t rows, int64_t width, float eps,
                       void* y, float* mean, float* rstd) {
  if (rows <= 0 || width <= 0) return;
  Dispatch2(x_dtype, weight_dtype, [&](auto t, auto w) {
    using T = typename decltype(t)::type;
    using W = typename decltype(w)::type;
    NormForwardKernel<<<NormBlocks(rows), RowThreads(width)>>>(
        layer_norm, static_cast<const T*>(x), static_cast<const W*>(gamma),
        static_cast<const W*>(beta), rows, width, eps, static_cast<T*>(y), mean, rstd);
  });
  CUDA_CHECK_LAUNCH("NormForwardKernel");
}

void LaunchNormBackwardInput(bool layer_norm, DType x_dtype, DType weight_dtype, const void* dy,
                             const void* x, const void* gamma, const float* mean, const float* rstd,
                             int64_t rows, int64_t width, void* dx) {
  if (rows <= 0 || width <= 0) return;
  Dispatch2(x_dtype, weight_dtype, [&](auto t, auto w) {
    using T = typename decltype(t)::type;
    using W = typename decltype(w)::type;
    NormBackwardInputKernel<<<NormBlocks(rows), RowThreads(width)>>>(
        layer_norm, static_cast<const T*>(dy), static_cast<const T*>(x),
        static_cast<const W*>(gamma), mean, rstd, rows, width, static_cast<T*>(dx));
  });
  CUDA_CHECK_LAUNCH("NormBackwardInputKernel");
}

void LaunchNormBackwardWeight(DType x_dtype, const void* dy, const void* x, const float* mean,
                              const float* rstd, int64_t rows, int64_t width, void* scratch,
                              float* dgamma, float* dbeta) {
  if (rows <= 0 || width <= 0) return;
  const ColumnSumPlan plan = PlanColumnSum(rows, width);
  auto* partials = static_cast<float2*>(scratch);
  Dispatch(x_dtype, [&](auto t) {
    using T = typename decltype(t)::type;
    NormBackwardWeightKernel<<<ColumnSumGrid(plan), ColumnSumBlock()>>>(
        static_cast<const T*>(dy), static_cast<const T*>(x), mean, rstd, rows, plan.rows_per_chunk,
        width, partials, dgamma, dbeta);
  });
  CUDA_CHECK_LAUNCH("NormBackwardWeightKernel");
  FinishColumnSum(plan, width, partials, dgamma, dbeta);
}

}  // namespace conveyor::cuda
