#include "runtime/cuda/device_math.h"
#include "runtime/cuda/rope_kernels.h"

namespace conveyor::cuda {
namespace {

// One thread per (token t, rotated head h, pair i). The rotated heads of a group are
// its heads_per_group query heads and its key head, which are adjacent, so head h of
// the token sits at group (h / (hpg + 1)) * group_width + (h % (hpg + 1)) * head_dim
// (group_width: the shape's, the value head's width included).
// With pos = positions[t], (x1, x2) = (head[i], head[half + i]), sign = -1 when inverse:
//   x1' = x1 cos - sign x2 sin,   x2' = x2 cos + sign x1 sin
template <typename T>
__global__ void RopeKernel(const float* __restrict__ cos_table, const float* __restrict__ sin_table,
                           const int32_t* __restrict__ positions, int64_t half,
                           int64_t heads_per_group, int64_t head_dim, int64_t group_width,
                           int64_t groups, float sign, int64_t tokens, T* __restrict__ qkv) {
  const int64_t rotated = heads_per_group + 1;  // per group
  const int64_t per_token = groups * rotated * half;
  CONVEYOR_GRID_STRIDE(idx, tokens * per_token) {
    const int64_t t = idx / per_token;
    const int64_t rest = idx - t * per_token;
    const int64_t h = rest / half, i = rest - h * half;
    const int64_t g = h / rotated, j = h - g * rotated;
    T* head = qkv + t * groups * group_width + g * group_width + j * head_dim;
    const int64_t pos = positions[t];
    const float c = cos_table[pos * half + i], s = sin_table[pos * half + i];
    const float a = Load(&head[i]), b = Load(&head[half + i]);
    Store(&head[i], a * c - sign * b * s);
    Store(&head[half + i], b * c + sign * a * s);
  }
}

}  // namespace

void LaunchRotateQueriesAndKeys(DType dtype, const float* cos, const float* sin, int64_t half,
                                const AttentionShape& shape, const int32_t* positions,
                                bool inverse, int64_t tokens, void* qkv) {
  const int64_t n = tokens * shape.groups * (shape.heads_per_group + 1) * half;
  if (n <= 0) return;
  Dispatch(dtype, [&](auto t) {
    using T = typename decltype(t)::type;
    RopeKernel<<<ElementwiseBlocks(n), kThreads>>>(
        cos, sin, positions, half, shape.heads_per_group, shape.head_dim, shape.group_width(),
        shape.groups, inverse ? -1.0f : 1.0f, tokens, static_cast<T*>(qkv));
  });
  CUDA_CHECK_LAUNCH("RopeKernel");
}

}  // namespace conveyor::cuda
