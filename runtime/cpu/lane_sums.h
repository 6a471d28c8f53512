// Sums in double whose loop vectorises: kLanes double accumulators (two AVX-512
// registers, four AVX2 ones, eight SSE ones), each adding every kLanes-th term, then
// folded in a fixed order. A single scalar accumulator waits on each add's latency
// (4 cycles a term); the lanes add 16 terms in that time. The result depends only on n
// and the terms, never on the clone or the thread that runs it, and its rounding error
// is at most the single accumulator's (each lane sums n / kLanes terms).
#ifndef CONVEYOR_RUNTIME_CPU_LANE_SUMS_H_
#define CONVEYOR_RUNTIME_CPU_LANE_SUMS_H_

#include <cstdint>

#include "runtime/cpu/vector_math.h"

namespace conveyor::cpu {

// The lanes folded pairwise (lane j with lane j + half, halving), a fixed order.
[[gnu::always_inline]] inline double FoldLanes(double* lane) {
  for (int half = kLanes / 2; half > 0; half /= 2) {
    for (int j = 0; j < half; ++j) lane[j] += lane[j + half];
  }
  return lane[0];
}

// sum_{i < n} term(i), term returning a double. Inlined into its caller, so that it is
// compiled for the caller's clone (CONVEYOR_VECTOR_CLONES).
template <typename Term>
[[gnu::always_inline]] inline double SumLanes(int64_t n, Term term) {
  double lane[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) lane[j] += term(i + j);
  }
  for (int j = 0; i < n; ++i, ++j) lane[j] += term(i);
  return FoldLanes(lane);
}

}  // namespace conveyor::cpu

#endif  // CONVEYOR_RUNTIME_CPU_LANE_SUMS_H_
