#include "runtime/cuda/activation_kernels.h"
#include "runtime/cuda/device_math.h"

namespace conveyor::cuda {
namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;

__device__ __forceinline__ float Sigmoid(float a) { return 1.0f / (1.0f + expf(-a)); }

// GELU, tanh form:  y = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3)
template <typename T>
__global__ void GeluForwardKernel(const T* __restrict__ x, int64_t n, T* __restrict__ y) {
  CONVEYOR_GRID_STRIDE(i, n) {
    const float v = Load(&x[i]);
    Store(&y[i], 0.5f * v * (1.0f + tanhf(kSqrt2OverPi * (v + kGeluCubic * v * v * v))));
  }
}

// dx = dy (0.5 (1 + t) + 0.5 x (1 - t^2) du/dx),  t = tanh(u),
// du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2)
template <typename T>
__global__ void GeluBackwardKernel(const T* __restrict__ x, const T* __restrict__ dy, int64_t n,
                                   T* __restrict__ dx) {
  CONVEYOR_GRID_STRIDE(i, n) {
    const float v = Load(&x[i]);
    const float t = tanhf(kSqrt2OverPi * (v + kGeluCubic * v * v * v));
    const float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * v * v);
    Store(&dx[i], Load(&dy[i]) * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du));
  }
}

// Squared ReLU (So et al., "Primer", 2021; Megatron's --squared-relu): y = max(x, 0)^2.
template <typename T>
__global__ void SquaredReluForwardKernel(const T* __restrict__ x, int64_t n, T* __restrict__ y) {
  CONVEYOR_GRID_STRIDE(i, n) {
    const float r = fmaxf(Load(&x[i]), 0.0f);
    Store(&y[i], r * r);
  }
}

// dx = 2 max(x, 0) dy.
template <typename T>
__global__ void SquaredReluBackwardKernel(const T* __restrict__ x, const T* __restrict__ dy,
                                          int64_t n, T* __restrict__ dx) {
  CONVEYOR_GRID_STRIDE(i, n) {
    Store(&dx[i], 2.0f * fmaxf(Load(&x[i]), 0.0f) * Load(&dy[i]));
  }
}

// SwiGLU: y[r, c] = a sigmoid(a) b with a = x[r, c], b = x[r, width + c].
template <typename T>
__global__ void SwigluForwardKernel(const T* __restrict__ x, int64_t rows, int64_t width,
                                    T* __restrict__ y) {
  CONVEYOR_GRID_STRIDE(i, rows * width) {
    const int64_t r = i / width, c = i - r * width;
    const float a = Load(&x[r * 2 * width + c]);
    const float b = Load(&x[r * 2 * width + width + c]);
    Store(&y[i], a * Sigmoid(a) * b);
  }
}

// With s = sigmoid(a) and g = dy:  da = g b s (1 + a (1 - s)),  db = g a s.
template <typename T>
__global__ void SwigluBackwardKernel(const T* __restrict__ x, const T* __restrict__ dy,
                                     int64_t rows, int64_t width, T* __restrict__ dx) {
  CONVEYOR_GRID_STRIDE(i, rows * width) {
    const int64_t r = i / width, c = i - r * width;
    const int64_t ia = r * 2 * width + c, ib = ia + width;
    const float a = Load(&x[ia]);
    const float b = Load(&x[ib]);
    const float s = Sigmoid(a);
    const float g = Load(&dy[i]);
    Store(&dx[ia], g * b * s * (1.0f + a * (1.0f - s)));
    Store(&dx[ib], g * a * s);
  }
}

}  // namespace

void LaunchGeluForward(DType dtype, const void* x, int64_t n, void* y) {
  if (n <= 0) return;
  Dispatch(dtype, [&](auto t) {
    using T = typename decltype(t)::type;
    GeluForwardKernel<<<ElementwiseBlocks(n), kThreads>>>(static_cast<const T*>(x), n,
                                                          static_cast<T*>(y));
  });
  CUDA_CHECK_LAUNCH("GeluForwardKernel");
}

void LaunchGeluBackward(DType dtype, const void* x, const void* dy, int64_t n, void* dx) {
  if (n <= 0) return;
  Dispatch(dtype, [&](auto t) {
    using T = typename decltype(t)::type;
    GeluBackwardKernel<<<ElementwiseBlocks(n), kThreads>>>(
        static_cast<const T*>(x), static_cast<const T*>(dy), n, static_cast<T*>(dx));
  });
  CUDA_CHECK_LAUNCH("GeluBackwardKernel");
}

void LaunchSquaredReluForward(DType dtype, const void* x, int64_t n, void* y) {
  if (n <= 0) return;
  Dispatch(dtype, [&](auto t) {
    using T = typename decltype(t)::type;
    SquaredReluForwardKernel<<<ElementwiseBlocks(n), kThreads>>>(static_cast<const T*>(x), n,
                                                                 static_cast<T*>(y));
  });
  CUDA_CHECK_LAUNCH("SquaredReluForwardKernel");
}

void LaunchSquaredReluBackward(DType dtype, const void* x, const void* dy, int64_t n, void* dx) {
  if (n <= 0) return;
  Dispatch(dtype, [&](auto t) {
    using T = typename decltype(t)::type;
    SquaredReluBackwardKernel<<<ElementwiseBlocks(n), kThreads>>>(
        static_cast<const T*>(x), static_cast<const T*>(dy), n, static_cast<T*>(dx));
  });
  CUDA_CHECK_LAUNCH("SquaredReluBackwardKernel");
}

void LaunchSwigluForward(DType dtype, const void* x, int64_t rows, int64_t width, void* y) {
  if (rows <= 0 || width <= 0) return;
  Dispatch(dtype, [&](auto t) {
    using T = typename decltype(t)::type;
    SwigluForwardKernel<<<ElementwiseBlocks(rows * width), kThreads>>>(
        static_cast<const T*>(x), rows, width, static_cast<T*>(y));
  });
  CUDA_CHECK_LAUNCH("SwigluForwardKernel");
}

void LaunchSwigluBackward(DType dtype, const void* x, const void* dy, int64_t rows, int64_t width,
                          void* dx) {
  if (rows <= 0 || width <= 0) return;
  Dispatch(dtype, [&](auto t) {
    using T = typename decltype(t)::type;
    SwigluBackwardKernel<<<ElementwiseBlocks(rows * width), kThreads>>>(
        static_cast<const T*>(x), static_cast<const T*>(dy), rows, width, static_cast<T*>(dx));
  });
  CUDA_CHECK_LAUNCH("SwigluBackwardKernel");
}

}  // namespace conveyor::cuda
