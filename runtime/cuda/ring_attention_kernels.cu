#include "runtime/cuda/device_math.h"
#include "runtime/cuda/philox_uniform.h"
#include "runtime/cuda/ring_attention_kernels.h"

// Per sample b, query head h (group g = h / heads_per_group), query row i, key row j:
//   s = scale q_i . k_j where visible, P = exp(s - lse_i),  M = dropout mask / (1 - p)
//   forward:  O_b = sum_j P_b M v_j with the block's own lse_b, merged into the running
//             (O, lse): lse' = log(e^lse + e^lse_b), O' = e^(lse - lse') O + e^(lse_b - lse') O_b
//   backward: D_i = dO_i . O_i,  dS = P (M dO_i . v_j - D_i)
//             dQ_i += scale sum_j dS k_j,  dK_j += scale sum_i dS q_i,  dV_j += sum_i P M dO_i
// q and k are head_dim wide, v, O and dO v_dim wide (different under multi-latent
// attention), so s sums over head_dim and dO_i . v_j over v_dim. A lane owns head
// dimensions lane, lane + 32, ... (kDims of them, covering both widths).

namespace conveyor::cuda {
namespace {

struct Block {
  int64_t batch, seq, key_rows, groups, per_group, head_dim, v_dim;
  const int32_t* query_positions;
  const int32_t* key_positions;
  const int32_t* document_start;
  int64_t length;  // the sample's tokens, for dropout indices
  int64_t window;  // sliding window, -1: none

  __device__ int64_t heads() const { return groups * per_group; }
  // A group of qkv: per_group query heads and the key head (head_dim each), the value head.
  __device__ int64_t group_width() const { return (per_group + 1) * head_dim + v_dim; }
  __device__ int64_t ld() const { return groups * group_width(); }
  // A group of kv: the key head, then the value head.
  __device__ int64_t ld_kv() const { return groups * (head_dim + v_dim); }
  __device__ int64_t ld_ctx() const { return heads() * v_dim; }
  __device__ int64_t QueryOffset(int64_t h) const {
    return (h / per_group) * group_width() + (h % per_group) * head_dim;
  }
  // Group g's key head in a kv row; its value head follows, head_dim further on.
  __device__ int64_t KeyValueOffset(int64_t g) const { return g * (head_dim + v_dim); }
  __device__ int64_t FirstKey(int64_t b, int64_t i) const {
    return document_start == nullptr ? 0 : document_start[b * seq + i];
  }
  __device__ bool Visible(int64_t first_key, int64_t i, int64_t j) const {
    const int64_t k = key_positions[j], q = query_positions[i];
    return k >= first_key && k <= q && (window < 0 || k >= q - window);
  }
};

struct Dropout {
  bool enabled;
  PhiloxKey key;
  float p, scale;
  int64_t first_sample, first_head, total_heads;

  // M for (b, h, query row i, key row j), by their positions in the sample.
  __device__ float Mask(const Block& k, int64_t b, int64_t h, int64_t i, int64_t j) const {
    if (!enabled) return 1.0f;
    const uint64_t index = static_cast<uint64_t>(
        (((first_sample + b) * total_heads + first_head + h) * k.length + k.query_positions[i]) *
            k.length +
        k.key_positions[j]);
    return DropoutKeeps(key, index, p) ? scale : 0.0f;
  }
};

// The dot product of two rows of d, fp32, summed over the warp in a fixed order.
template <typename A, typename B>
__device__ float WarpDot(const A* a, const B* b, int64_t d) {
  float s = 0.0f;
  for (int64_t c = threadIdx.x; c < d; c += 32) s += Load(&a[c]) * Load(&b[c]);
  return WarpAllReduce(s, SumOp{});
}

// Where element e of a packed [rows, groups * (d + dv)] key/value tensor sits in the fused
// qkv rows (per group: per_group query heads and the key head, d each, the value head, dv):
// a packed group's key and value heads are its fused group's last d + dv elements.
__device__ int64_t FusedKeyValueIndex(int64_t e, const Block& k) {
  const int64_t width = k.ld_kv(), pair = k.head_dim + k.v_dim;
  const int64_t r = e / width, c = e % width, g = c / pair;
  return r * k.ld() + g * k.group_width() + k.per_group * k.head_dim + c % pair;
}

template <typename T>
__global__ void PackKernel(int64_t n, Block k, const T* __restrict__ qkv, T* __restrict__ kv) {
  CONVEYOR_GRID_STRIDE(e, n) { kv[e] = qkv[FusedKeyValueIndex(e, k)]; }
}

template <typename T>
__global__ void AddKeyValueGradKernel(int64_t n, Block k, const float* __restrict__ dkv,
                                      T* __restrict__ dqkv) {
  CONVEYOR_GRID_STRIDE(e, n) {
    T* out = &dqkv[FusedKeyValueIndex(e, k)];
    Store(out, Load(out) + dkv[e]);
  }
}

// Grid (seq, heads, batch), one warp.
template <typename T, int kDims>
__global__ void BlockForwardKernel(Block k, const T* __restrict__ qkv, const T* __restrict__ kv,
                                   float scale, Dropout drop, bool first, float* __restrict__ ctx,
                                   float* __restrict__ lse) {
  const int64_t i = blockIdx.x, h = blockIdx.y, b = blockIdx.z, g = h / k.per_group;
  const int lane = threadIdx.x;
  const T* q = qkv + (b * k.seq + i) * k.ld() + k.QueryOffset(h);
  const int64_t first_key = k.FirstKey(b, i);
  float m = -INFINITY, l = 0.0f, o[kDims];
#pragma unroll
  for (int e = 0; e < kDims; ++e) o[e] = 0.0f;
  for (int64_t j = 0; j < k.key_rows; ++j) {
    if (!k.Visible(first_key, i, j)) continue;  // warp-uniform
    const T* key = kv + (b * k.key_rows + j) * k.ld_kv() + k.KeyValueOffset(g);
    const float s = scale * WarpDot(q, key, k.head_dim);
    const float m_new = fmaxf(m, s);
    const float correction = expf(m - m_new);  // 0 on the first visible key
    const float p = expf(s - m_new);
    l = l * correction + p;
    const float p_used = p * drop.Mask(k, b, h, i, j);
#pragma unroll
    for (int e = 0; e < kDims; ++e) {
      const int64_t c = lane + 32 * e;
      o[e] = o[e] * correction + (c < k.v_dim ? p_used * Load(&key[k.head_dim + c]) : 0.0f);
    }
    m = m_new;
  }
  float* out = ctx + (b * k.seq + i) * k.ld_ctx() + h * k.v_dim;
  float* row_lse = lse + (b * k.heads() + h) * k.seq + i;
  const float old_lse = first ? -INFINITY : *row_lse;
  if (l == 0.0f) {  // nothing visible in this block: the running result stands
    if (first) {
      for (int64_t c = lane; c < k.v_dim; c += 32) out[c] = 0.0f;
      if (lane == 0) *row_lse = -INFINITY;
    }
    return;
  }
  const float block_lse = m + logf(l);
  const float new_lse = old_lse == -INFINITY
                            ? block_lse
                            : fmaxf(old_lse, block_lse) + log1pf(expf(-fabsf(old_lse - block_lse)));
  const float keep_old = old_lse == -INFINITY ? 0.0f : expf(old_lse - new_lse);
  const float take_block = expf(block_lse - new_lse) / l;
#pragma unroll
  for (int e = 0; e < kDims; ++e) {
    const int64_t c = lane + 32 * e;
    if (c < k.v_dim) out[c] = (keep_old == 0.0f ? 0.0f : out[c] * keep_old) + o[e] * take_block;
  }
  __syncwarp();
  if (lane == 0) *row_lse = new_lse;
}

// D = rowsum(dO * O): grid (seq, heads, batch), one warp.
template <typename T>
__global__ void RowDotKernel(Block k, const T* __restrict__ ctx, const T* __restrict__ dctx,
                             float* __restrict__ row_dot) {
  const int64_t i = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int64_t at = (b * k.seq + i) * k.ld_ctx() + h * k.v_dim;
  const float d = WarpDot(ctx + at, dctx + at, k.v_dim);
  if (threadIdx.x == 0) row_dot[(b * k.heads() + h) * k.seq + i] = d;
}

// dQ: grid (seq, heads, batch), one warp per query row.
template <typename T, int kDims>
__global__ void BlockQueryGradKernel(Block k, const T* __restrict__ qkv, const T* __restrict__ kv,
                                     const float* __restrict__ lse, const T* __restrict__ dctx,
                                     const float* __restrict__ row_dot, float scale, Dropout drop,
                                     T* __restrict__ dqkv) {
  const int64_t i = blockIdx.x, h = blockIdx.y, b = blockIdx.z, g = h / k.per_group;
  const int lane = threadIdx.x;
  const int64_t row = b * k.seq + i, stat = (b * k.heads() + h) * k.seq + i;
  const T* q = qkv + row * k.ld() + k.QueryOffset(h);
  const T* d_out = dctx + row * k.ld_ctx() + h * k.v_dim;
  const int64_t first_key = k.FirstKey(b, i);
  float dq[kDims];
#pragma unroll
  for (int e = 0; e < kDims; ++e) dq[e] = 0.0f;
  for (int64_t j = 0; j < k.key_rows; ++j) {
    if (!k.Visible(first_key, i, j)) continue;  // warp-uniform
    const T* key = kv + (b * k.key_rows + j) * k.ld_kv() + k.KeyValueOffset(g);
    const float p = expf(scale * WarpDot(q, key, k.head_dim) - lse[stat]);
    const float dp = WarpDot(d_out, key + k.head_dim, k.v_dim) * drop.Mask(k, b, h, i, j);
    const float ds = p * (dp - row_dot[stat]);
#pragma unroll
    for (int e = 0; e < kDims; ++e) {
      const int64_t c = lane + 32 * e;
      if (c < k.head_dim) dq[e] += ds * Load(&key[c]);
    }
  }
  T* out = dqkv + row * k.ld() + k.QueryOffset(h);
#pragma unroll
  for (int e = 0; e < kDims; ++e) {
    const int64_t c = lane + 32 * e;
    if (c < k.head_dim) Store(&out[c], Load(&out[c]) + scale * dq[e]);
  }
}

// dK, dV: grid (key_rows, groups, batch), one warp per key row; over the group's heads
// and every query row, in order.
template <typename T, int kDims>
__global__ void BlockKeyValueGradKernel(Block k, const T* __restrict__ qkv,
                                        const T* __restrict__ kv, const float* __restrict__ lse,
                                        const T* __restrict__ dctx,
                                        const float* __restrict__ row_dot, float scale,
                                        Dropout drop, float* __restrict__ dkv) {
  const int64_t j = blockIdx.x, g = blockIdx.y, b = blockIdx.z;
  const int lane = threadIdx.x;
  const T* key = kv + (b * k.key_rows + j) * k.ld_kv() + k.KeyValueOffset(g);
  float dk[kDims], dv[kDims];
#pragma unroll
  for (int e = 0; e < kDims; ++e) dk[e] = dv[e] = 0.0f;
  for (int64_t hh = 0; hh < k.per_group; ++hh) {
    const int64_t h = g * k.per_group + hh;
    for (int64_t i = 0; i < k.seq; ++i) {
      if (!k.Visible(k.FirstKey(b, i), i, j)) continue;  // warp-uniform
      const int64_t row = b * k.seq + i, stat = (b * k.heads() + h) * k.seq + i;
      const T* q = qkv + row * k.ld() + k.QueryOffset(h);
      const T* d_out = dctx + row * k.ld_ctx() + h * k.v_dim;
      const float p = expf(scale * WarpDot(q, key, k.head_dim) - lse[stat]);
      const float mask = drop.Mask(k, b, h, i, j);
      const float ds = p * (WarpDot(d_out, key + k.head_dim, k.v_dim) * mask - row_dot[stat]);
#pragma unroll
      for (int e = 0; e < kDims; ++e) {
        const int64_t c = lane + 32 * e;
        if (c < k.head_dim) dk[e] += ds * Load(&q[c]);
        if (c < k.v_dim) dv[e] += p * mask * Load(&d_out[c]);
      }
    }
  }
  float* out = dkv + (b * k.key_rows + j) * k.ld_kv() + k.KeyValueOffset(g);
#pragma unroll
  for (int e = 0; e < kDims; ++e) {
    const int64_t c = lane + 32 * e;
    if (c < k.head_dim) out[c] += scale * dk[e];
    if (c < k.v_dim) out[k.head_dim + c] += dv[e];
  }
}

Block BlockOf(const AttentionBlockArgs& a) {
  const AttentionShape& s = a.shape;
  const int64_t length = a.sample_length > 0 ? a.sample_length : s.seq;
  return {s.batch,    s.seq,         a.key_rows,        s.groups,        s.heads_per_group,
          s.head_dim, s.value_dim(), a.query_positions, a.key_positions, a.document_start,
          length,     a.window};
}

// The rows' layout alone, for packing and unpacking keys and values.
Block LayoutOf(const AttentionShape& s) {
  AttentionBlockArgs args;
  args.shape = s;
  return BlockOf(args);
}

Dropout DropoutOf(const AttentionDropoutArgs& a) {
  return {a.enabled,      a.key,        a.p,          a.enabled ? 1.0f / (1.0f - a.p) : 1.0f,
          a.first_sample, a.first_head, a.total_heads};
}

void CheckBlock(const AttentionShape& s) {
  if (s.head_dim <= 0 || WidestAttentionHead(s) > kMaxAttentionHeadDim) {
    Fatal("AttentionBlock",
          "head_dim and value_dim must be in [1, 256] for the CUDA ring attention kernels");
  }
  if (s.heads() > 65535 || s.batch > 65535) Fatal("AttentionBlock", "too many heads or samples");
}

}  // namespace

void LaunchPackKeysValues(DType dtype, const AttentionShape& s, const void* qkv, void* kv) {
  const int64_t n = s.batch * s.seq * s.kv_width();
  if (n == 0) return;
  const Block block = LayoutOf(s);
  Dispatch(dtype, [&](auto t) {
    using T = typename decltype(t)::type;
    PackKernel<T><<<ElementwiseBlocks(n), kThreads>>>(n, block, static_cast<const T*>(qkv),
                                                      static_cast<T*>(kv));
  });
  CUDA_CHECK_LAUNCH("PackKernel");
}

void LaunchAddKeyValueGrad(DType dtype, const AttentionShape& s, const float* dkv, void* dqkv) {
  const int64_t n = s.batch * s.seq * s.kv_width();
  if (n == 0) return;
  const Block block = LayoutOf(s);
  Dispatch(dtype, [&](auto t) {
    using T = typename decltype(t)::type;
    AddKeyValueGradKernel<T>
        <<<ElementwiseBlocks(n), kThreads>>>(n, block, dkv, static_cast<T*>(dqkv));
  });
  CUDA_CHECK_LAUNCH("AddKeyValueGradKernel");
}

void LaunchAttentionBlockForward(DType dtype, const AttentionBlockArgs& args, const void* qkv,
                                 const void* kv, float scale, const AttentionDropoutArgs& dropout,
                                 bool first, float* ctx, float* lse) {
  const AttentionShape& s = args.shape;
  CheckBlock(s);
  if (s.batch <= 0 || s.seq <= 0) return;
  const dim3 grid(static_cast<unsigned>(s.seq), static_cast<unsigned>(s.heads()),
                  static_cast<unsigned>(s.batch));
  Dispatch(dtype, [&](auto t) {
    using T = typename decltype(t)::type;
    DispatchDimsPerLane(WidestAttentionHead(s), [&](auto dims) {
      BlockForwardKernel<T, decltype(dims)::value>
          <<<grid, 32>>>(BlockOf(args), static_cast<const T*>(qkv), static_cast<const T*>(kv),
                         scale, DropoutOf(dropout), first, ctx, lse);
    });
  });
  CUDA_CHECK_LAUNCH("BlockForwardKernel");
}

void LaunchAttentionBlockBackward(DType dtype, const AttentionBlockArgs& args, const void* qkv,
                                  const void* kv, const void* ctx, const float* lse,
                                  const void* dctx, float scale,
                                  const AttentionDropoutArgs& dropout, float* row_dot, void* dqkv,
                                  float* dkv) {
  const AttentionShape& s = args.shape;
  CheckBlock(s);
  if (s.batch <= 0 || s.seq <= 0 || args.key_rows <= 0) return;
  const Block block = BlockOf(args);
  const Dropout drop = DropoutOf(dropout);
  const dim3 rows(static_cast<unsigned>(s.seq), static_cast<unsigned>(s.heads()),
                  static_cast<unsigned>(s.batch));
  const dim3 keys(static_cast<unsigned>(args.key_rows), static_cast<unsigned>(s.groups),
                  static_cast<unsigned>(s.batch));
  Dispatch(dtype, [&](auto t) {
    using T = typename decltype(t)::type;
    const T* q = static_cast<const T*>(qkv);
    const T* k = static_cast<const T*>(kv);
    const T* d_out = static_cast<const T*>(dctx);
    RowDotKernel<T><<<rows, 32>>>(block, static_cast<const T*>(ctx), d_out, row_dot);
    CUDA_CHECK_LAUNCH("RowDotKernel");
    DispatchDimsPerLane(WidestAttentionHead(s), [&](auto dims) {
      BlockQueryGradKernel<T, decltype(dims)::value>
          <<<rows, 32>>>(block, q, k, lse, d_out, row_dot, scale, drop, static_cast<T*>(dqkv));
      CUDA_CHECK_LAUNCH("BlockQueryGradKernel");
      BlockKeyValueGradKernel<T, decltype(dims)::value>
          <<<keys, 32>>>(block, q, k, lse, d_out, row_dot, scale, drop, dkv);
      CUDA_CHECK_LAUNCH("BlockKeyValueGradKernel");
    });
  });
}

}  // namespace conveyor::cuda
