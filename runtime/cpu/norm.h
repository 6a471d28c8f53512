// LayerNorm and RMSNorm over the last dimension of a [rows, width] matrix.
//
//   LayerNorm: y = (x - mean) * rstd * gamma + beta,   rstd = 1 / sqrt(var + eps)
//   RMSNorm:   y = x * rstd * gamma,                   rstd = 1 / sqrt(mean(x^2) + eps)
//
// Backward is split as the zero-bubble schedules need it: NormBackwardInput gives dx,
// NormBackwardWeight accumulates dgamma (and dbeta) later from the same saved stats.
// With xhat = (x - mean) * rstd (mean = 0 for RMSNorm) and g = dy * gamma:
//   LayerNorm: dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
//   RMSNorm:   dx = rstd * (g - xhat * mean(g * xhat))
//   dgamma += sum_rows dy * xhat,   dbeta += sum_rows dy
#ifndef CONVEYOR_RUNTIME_CPU_NORM_H_
#define CONVEYOR_RUNTIME_CPU_NORM_H_

#include <cstdint>

#include "runtime/op_params.h"

namespace conveyor::cpu {

// mean and rstd receive one value per row (mean is left 0 for RMSNorm).
// beta may be null (RMSNorm).
void NormForward(NormKind kind, const float* x, const float* gamma, const float* beta, int64_t rows,
                 int64_t width, float eps, float* y, float* mean, float* rstd);

void NormBackwardInput(NormKind kind, const float* dy, const float* x, const float* gamma,
                       const float* mean, const float* rstd, int64_t rows, int64_t width,
                       float* dx);

// Accumulates into dgamma (and dbeta when not null).
void NormBackwardWeight(const float* dy, const float* x, const float* mean, const float* rstd,
                        int64_t rows, int64_t width, float* dgamma, float* dbeta);

}  // namespace conveyor::cpu

#endif  // CONVEYOR_RUNTIME_CPU_NORM_H_
