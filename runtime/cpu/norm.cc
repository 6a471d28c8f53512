#include "runtime/cpu/norm.h"

#include <cmath>

#include "runtime/cpu/thread_pool.h"
#include "runtime/cpu/vector_math.h"

namespace conveyor::cpu {
namespace {

// Rows per pool task.
constexpr int64_t kGrain = 16;

}  // namespace

void NormForward(NormKind kind, const float* x, const float* gamma, const float* beta, int64_t rows,
                 int64_t width, float eps, float* y, float* mean, float* rstd) {
  ParallelFor(rows, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* xr = x + r * width;
      float* yr = y + r * width;
      // Accumulate in double: rows are long and fp32 sums of squares lose digits.
      double mu = 0.0;
      if (kind == NormKind::kLayerNorm) {
        for (int64_t i = 0; i < width; ++i) mu += xr[i];
        mu /= static_cast<double>(width);
      }
      double var = 0.0;
      for (int64_t i = 0; i < width; ++i) {
        const double d = xr[i] - mu;
        var += d * d;
      }
      var /= static_cast<double>(width);
      const float rs = static_cast<float>(1.0 / std::sqrt(var + eps));
      mean[r] = static_cast<float>(mu);
      rstd[r] = rs;
      for (int64_t i = 0; i < width; ++i) {
        const float xhat = (xr[i] - mean[r]) * rs;
        yr[i] = xhat * gamma[i] + (beta != nullptr ? beta[i] : 0.0f);
      }
    }
  });
}

void NormBackwardInput(NormKind kind, const float* dy, const float* x, const float* gamma,
                       const float* mean, const float* rstd, int64_t rows, int64_t width,
                       float* dx) {
  ParallelFor(rows, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* dyr = dy + r * width;
      const float* xr = x + r * width;
      float* dxr = dx + r * width;
      double sum_g = 0.0, sum_g_xhat = 0.0;
      for (int64_t i = 0; i < width; ++i) {
        const double g = static_cast<double>(dyr[i]) * gamma[i];
        sum_g += g;
        sum_g_xhat += g * ((xr[i] - mean[r]) * rstd[r]);
      }
      const float mean_g = kind == NormKind::kLayerNorm ? static_cast<float>(sum_g / width) : 0.0f;
      const float mean_g_xhat = static_cast<float>(sum_g_xhat / width);
      for (int64_t i = 0; i < width; ++i) {
        const float xhat = (xr[i] - mean[r]) * rstd[r];
        dxr[i] = rstd[r] * (dyr[i] * gamma[i] - mean_g - xhat * mean_g_xhat);
      }
    }
  });
}

// One thread: split by columns it ran slower here (each thread walks every row for a
// sliver of it), and split by rows the sums would depend on the thread count. Each
// column still adds its rows in order; the row's pass is vectorised (vector_math.h).
CONVEYOR_VECTOR_CLONES
void NormBackwardWeight(const float* dy, const float* x, const float* mean, const float* rstd,
                        int64_t rows, int64_t width, float* dgamma, float* dbeta) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* dyr = dy + r * width;
    const float* xr = x + r * width;
    const float mu = mean[r], rs = rstd[r];
    MapLanes(width, dgamma, [&](int64_t i) { return dgamma[i] + dyr[i] * ((xr[i] - mu) * rs); });
    if (dbeta != nullptr) MapLanes(width, dbeta, [&](int64_t i) { return dbeta[i] + dyr[i]; });
  }
}

}  // namespace conveyor::cpu
