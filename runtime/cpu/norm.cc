#include "runtime/cpu/norm.h"

#include <cmath>

#include "runtime/cpu/thread_pool.h"
#include "runtime/cpu/vector_math.h"

namespace conveyor::cpu {
namespace {

// Rows per pool task.
constexpr int64_t kGrain = 16;

// One row of NormForward. The statistics accumulate in double (rows are long and fp32
// sums of squares lose digits), in vector lanes (SumInDouble); the row is in L1 after
// the first pass, so the mean and the variance each take their own (two-pass, as
// var = mean((x - mean)^2) stays exact where mean(x^2) - mean^2 cancels).
CONVEYOR_VECTOR_CLONES
void NormForwardRow(NormKind kind, const float* x, const float* gamma, const float* beta,
                    int64_t width, float eps, float* y, float* mean, float* rstd) {
  const double w = static_cast<double>(width);
  const auto value = [&](int64_t i) { return static_cast<double>(x[i]); };
  const double mu = kind == NormKind::kLayerNorm ? SumInDouble(width, value) / w : 0.0;
  const auto square = [&](int64_t i) { return (x[i] - mu) * (x[i] - mu); };
  const double var = SumInDouble(width, square) / w;
  const float m = static_cast<float>(mu);
  const float rs = static_cast<float>(1.0 / std::sqrt(var + eps));
  *mean = m;
  *rstd = rs;
  if (beta != nullptr) {
    MapLanes(width, y, [&](int64_t i) { return (x[i] - m) * rs * gamma[i] + beta[i]; });
  } else {
    MapLanes(width, y, [&](int64_t i) { return (x[i] - m) * rs * gamma[i]; });
  }
}

// One row of NormBackwardInput: mean(g) and mean(g * xhat) summed in double lanes, with
// g = dy * gamma taken in double and xhat in fp32 as the fp32 pass below computes it.
CONVEYOR_VECTOR_CLONES
void NormBackwardInputRow(NormKind kind, const float* dy, const float* x, const float* gamma,
                          float mean, float rstd, int64_t width, float* dx) {
  const double w = static_cast<double>(width);
  const auto g = [&](int64_t i) { return static_cast<double>(dy[i]) * gamma[i]; };
  const auto g_xhat = [&](int64_t i) { return g(i) * ((x[i] - mean) * rstd); };
  const float mean_g =
      kind == NormKind::kLayerNorm ? static_cast<float>(SumInDouble(width, g) / w) : 0.0f;
  const float mean_g_xhat = static_cast<float>(SumInDouble(width, g_xhat) / w);
  MapLanes(width, dx, [&](int64_t i) {
    const float xhat = (x[i] - mean) * rstd;
    return rstd * (dy[i] * gamma[i] - mean_g - xhat * mean_g_xhat);
  });
}

}  // namespace

void NormForward(NormKind kind, const float* x, const float* gamma, const float* beta, int64_t rows,
                 int64_t width, float eps, float* y, float* mean, float* rstd) {
  ParallelFor(rows, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      NormForwardRow(kind, x + r * width, gamma, beta, width, eps, y + r * width, mean + r,
                     rstd + r);
    }
  });
}

void NormBackwardInput(NormKind kind, const float* dy, const float* x, const float* gamma,
                       const float* mean, const float* rstd, int64_t rows, int64_t width,
                       float* dx) {
  ParallelFor(rows, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      NormBackwardInputRow(kind, dy + r * width, x + r * width, gamma, mean[r], rstd[r], width,
                           dx + r * width);
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
