#include "runtime/cpu/activation.h"

#include "runtime/cpu/vector_math.h"

namespace conveyor::cpu {
namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;

}  // namespace

// With s = sigmoid(2u): 1 + tanh(u) = 2s and 1 - tanh(u)^2 = 4s(1 - s), so
//   y = x s,  dy/dx = s + 2 x s (1 - s) du/dx.
// The same function as the header's, without 1 + tanh(u)'s cancellation for negative x
// (there the tanh form loses every digit of y), and one exp instead of a tanhf, the
// vectorised one of vector_math.h.
CONVEYOR_VECTOR_CLONES
void GeluForward(const float* x, int64_t n, float* y) {
  MapLanes(n, y, [&](int64_t i) {
    const float v = x[i];
    return v * Sigmoid(2.0f * kSqrt2OverPi * (v + kGeluCubic * v * v * v));
  });
}

CONVEYOR_VECTOR_CLONES
void GeluBackward(const float* x, const float* dy, int64_t n, float* dx) {
  MapLanes(n, dx, [&](int64_t i) {
    const float v = x[i];
    const float s = Sigmoid(2.0f * kSqrt2OverPi * (v + kGeluCubic * v * v * v));
    const float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * v * v);
    return dy[i] * (s + 2.0f * v * s * (1.0f - s) * du);
  });
}

void SwigluForward(const float* x, int64_t rows, int64_t width, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* a = x + r * 2 * width;
    const float* b = a + width;
    for (int64_t i = 0; i < width; ++i) y[r * width + i] = a[i] * Sigmoid(a[i]) * b[i];
  }
}

void SwigluBackward(const float* x, const float* dy, int64_t rows, int64_t width, float* dx) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* a = x + r * 2 * width;
    const float* b = a + width;
    float* da = dx + r * 2 * width;
    float* db = da + width;
    for (int64_t i = 0; i < width; ++i) {
      const float s = Sigmoid(a[i]);
      const float g = dy[r * width + i];
      da[i] = g * b[i] * s * (1.0f + a[i] * (1.0f - s));
      db[i] = g * a[i] * s;
    }
  }
}

void SquaredReluForward(const float* x, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) {
    const float r = x[i] > 0.0f ? x[i] : 0.0f;
    y[i] = r * r;
  }
}

void SquaredReluBackward(const float* x, const float* dy, int64_t n, float* dx) {
  for (int64_t i = 0; i < n; ++i) dx[i] = 2.0f * (x[i] > 0.0f ? x[i] : 0.0f) * dy[i];
}

}  // namespace conveyor::cpu
