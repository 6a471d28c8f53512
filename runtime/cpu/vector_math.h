// Helpers for loops the compiler turns into vector instructions: an exp without libm's
// branches and a block shape the vectoriser recognises at -O2.
//
// The tree builds for x86-64-v2 (SSE4.2), so a hot loop is compiled three times
// (CONVEYOR_VECTOR_CLONES: AVX-512, AVX2, SSE) and the loader picks the clone the CPU
// runs. A loop vectorises when it is written as blocks of kLanes iterations with a
// fixed trip count (MapLanes), which -O2's cost model accepts; the block's results are
// the scalar loop's, element by element.
#ifndef CONVEYOR_RUNTIME_CPU_VECTOR_MATH_H_
#define CONVEYOR_RUNTIME_CPU_VECTOR_MATH_H_

#include <cstdint>

#define CONVEYOR_VECTOR_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))

namespace conveyor::cpu {

// 16 floats: one AVX-512 register, two AVX2 ones, four SSE ones.
constexpr int kLanes = 16;

// exp(x) in fp32 (Cephes' expf, relative error under 1e-7 on [-87.3, 88.7]):
//   x = n ln2 + r, |r| <= ln2 / 2  (n = round(x / ln2), ln2 split in two for exactness)
//   exp(r) ~ 1 + r + r^2 P(r), P a degree-5 minimax polynomial
//   exp(x) = 2^n exp(r), 2^n built from its exponent bits.
// x is clamped to the range where 2^n is a normal float (below it the result is
// ~1.2e-38, where libm gives 0 or a denormal; above it FLT_MAX-ish, where libm gives
// inf); NaN stays NaN. No branches, so a loop of it vectorises.
[[gnu::always_inline]] inline float Exp(float x) {
  x = x < -87.33654f ? -87.33654f : x;
  x = x > 88.72283f ? 88.72283f : x;
  // Adding 1.5 * 2^23 rounds to the nearest integer in the float's last place.
  const float shifter = 12582912.0f;
  const float n = (x * 1.44269504f + shifter) - shifter;
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;
  return p * __builtin_bit_cast(float, bits);
}

// 1 / (1 + exp(-a)).
[[gnu::always_inline]] inline float Sigmoid(float a) { return 1.0f / (1.0f + Exp(-a)); }

// out[i] = value(i) for i in [0, n), value reading only its own inputs: blocks of kLanes
// (vectorised), then the rest. A block computes all its values before it stores any, so
// the vectoriser needs no proof that out does not alias the inputs (it may be one of
// them). Inlined into its caller, so that it is compiled for the caller's clone.
template <typename Value>
[[gnu::always_inline]] inline void MapLanes(int64_t n, float* out, Value value) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    float block[kLanes];
    for (int j = 0; j < kLanes; ++j) block[j] = value(i + j);
    for (int j = 0; j < kLanes; ++j) out[i + j] = block[j];
  }
  for (; i < n; ++i) out[i] = value(i);
}

// combine(... combine(init, value(0)) ..., value(n - 1)) in a fixed order that
// vectorises: lane j of kLanes combines the values j, j + kLanes, j + 2 kLanes, ...,
// then the lanes combine pairwise (j with j + 8, j + 4, ...). The order is the same in
// every clone (a clone with FMA may fuse a value's multiply into the add); it differs
// from the scalar loop's only in rounding (combine associative up to rounding: +, max).
// Inlined like MapLanes. T is float or double (kLanes doubles: two AVX-512 registers).
template <typename T, typename Combine, typename Value>
[[gnu::always_inline]] inline T ReduceLanes(int64_t n, T init, Combine combine, Value value) {
  T acc[kLanes];
  for (int j = 0; j < kLanes; ++j) acc[j] = init;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) acc[j] = combine(acc[j], value(i + j));
  }
  for (int j = 0; i + j < n; ++j) acc[j] = combine(acc[j], value(i + j));
  for (int width = kLanes / 2; width > 0; width /= 2) {
    for (int j = 0; j < width; ++j) acc[j] = combine(acc[j], acc[j + width]);
  }
  return acc[0];
}

// sum_i value(i) for i in [0, n), value returning a double, in ReduceLanes' order over
// double lanes: long sums of fp32 terms (the norms' row statistics, the gradient norm)
// keep their digits, and the adds do not wait on one accumulator's latency (4 cycles a
// term).
template <typename Value>
[[gnu::always_inline]] inline double SumInDouble(int64_t n, Value value) {
  return ReduceLanes(n, 0.0, [](double a, double b) { return a + b; }, value);
}

}  // namespace conveyor::cpu

#endif  // CONVEYOR_RUNTIME_CPU_VECTOR_MATH_H_
