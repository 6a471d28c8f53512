// MLP activations, elementwise over [rows, width].
//
//   GELU (tanh form, as Megatron's fused bias-GELU and GPT-2 use it):
//     y = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3)
//     dy/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2),  t = tanh(u)
//   SwiGLU: the input row is [a | b] (2 * width wide, Megatron's chunk order);
//     y = silu(a) * b,  silu(a) = a * sigmoid(a)
//     da = dy * b * sigmoid(a) (1 + a (1 - sigmoid(a))),  db = dy * silu(a)
#ifndef CONVEYOR_RUNTIME_CPU_ACTIVATION_H_
#define CONVEYOR_RUNTIME_CPU_ACTIVATION_H_

#include <cstdint>

namespace conveyor::cpu {

void GeluForward(const float* x, int64_t n, float* y);
void GeluBackward(const float* x, const float* dy, int64_t n, float* dx);

// x is [rows, 2 * width], y and dy are [rows, width], dx is [rows, 2 * width].
void SwigluForward(const float* x, int64_t rows, int64_t width, float* y);
void SwigluBackward(const float* x, const float* dy, int64_t rows, int64_t width, float* dx);

// Squared ReLU (So et al., "Primer", 2021; Megatron's --squared-relu):
//   y = max(x, 0)^2,  dy/dx = 2 max(x, 0).
void SquaredReluForward(const float* x, int64_t n, float* y);
void SquaredReluBackward(const float* x, const float* dy, int64_t n, float* dx);

}  // namespace conveyor::cpu

#endif  // CONVEYOR_RUNTIME_CPU_ACTIVATION_H_
