#include "runtime/cuda/attention_kernels.h"
#include "runtime/cuda/device_math.h"

// Notation, per sample b and query head h (key/value group g = h / heads_per_group):
//   S = scale Q K^T (causal: S[i][j] = -inf for j > i, and for j < i - window under a
//   sliding window),  P = softmax_rows(S)
//   lse[i] = log sum_j exp(S[i][j]),  so P[i][j] = exp(S[i][j] - lse[i])
//   M = dropout mask scaled by 1 / (1 - p) (all ones without dropout),  P' = P * M
//   O = P' V
// Backward, with dO given and D[i] = rowsum(dO * O)[i] = sum_j P'[i][j] dP'[i][j]:
//   dP' = dO V^T,  dS = P * (M * dP' - D)
//   dQ = scale dS K,  dK = scale dS^T Q,  dV = P'^T dO   (summed over a group's heads)
// Q and K rows are d = head_dim wide; V, O and dO rows dv = value_dim() wide (dv != d
// under multi-latent attention): S and dP' are dot products over d and dv respectively.
//
// Tiling: 32 query rows and 32 keys per tile. A block has 8 warps; in the query-major
// kernels (forward, dQ) each warp owns 4 query rows, lane j computes the score against
// key j of the tile, and for the [., d] and [., dv] accumulators lane l owns dimensions
// l, l + 32, ... (kDimsPerLane covers max(d, dv)). The key-major kernel (dK, dV) swaps
// the roles of queries and keys. Tiles live in shared memory as fp32; the tile a lane
// reads a whole row of is padded to its width + 1 floats so the 32 lanes hit 32
// different banks.

namespace conveyor::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kRowsPerWarp = 4;
constexpr int kTile = kWarps * kRowsPerWarp;  // query rows per block = keys per tile = 32
static_assert(kTile == 32, "one key (or query) per lane");
constexpr unsigned kFullMask = 0xffffffffu;

__host__ __device__ __forceinline__ int64_t Min64(int64_t a, int64_t b) { return a < b ? a : b; }
__host__ __device__ __forceinline__ int64_t Max64(int64_t a, int64_t b) { return a > b ? a : b; }

// Where the heads of a sample's tokens live.
struct Geometry {
  int64_t seq;
  int64_t heads;
  int64_t heads_per_group;
  int64_t head_dim;
  int64_t value_dim;  // of the value heads and so of the context's heads
  int64_t ld;         // qkv row width
  int64_t ld_ctx;     // ctx row width = heads * value_dim
  // Document masking: row i of sample b sees keys from document_start[b * seq + i] on
  // (null: from 0).
  const int32_t* document_start;
  int64_t window;  // sliding window: keys from i - window on; -1: unbounded

  __device__ bool Visible(int64_t b, int64_t i, int64_t j) const {
    return j <= i && (window < 0 || j >= i - window) &&
           (document_start == nullptr || j >= document_start[b * seq + i]);
  }
  // The first key tile a query tile starting at q_start can see (0 without a window).
  __device__ int64_t FirstKeyTile(int64_t q_start) const {
    return window < 0 ? 0 : Max64(0, q_start - window) / kTile * kTile;
  }
  // The end of the query rows that can see a key tile starting at k_start.
  __device__ int64_t QueryEnd(int64_t k_start) const {
    return window < 0 ? seq : Min64(seq, k_start + kTile + window);
  }

  // A group: its heads_per_group query heads and its key head (head_dim each), then its
  // value head (value_dim).
  __device__ int64_t GroupStart(int64_t g) const {
    return g * ((heads_per_group + 1) * head_dim + value_dim);
  }
  __device__ int64_t QueryOffset(int64_t h) const {
    return GroupStart(h / heads_per_group) + (h % heads_per_group) * head_dim;
  }
  __device__ int64_t KeyOffset(int64_t g) const {
    return GroupStart(g) + heads_per_group * head_dim;
  }
  __device__ int64_t ValueOffset(int64_t g) const { return KeyOffset(g) + head_dim; }
  __device__ int64_t ContextOffset(int64_t h) const { return h * value_dim; }
};

struct Dropout {
  bool enabled;
  PhiloxKey key;
  float p;
  float scale;  // 1 / (1 - p)
  int64_t first_sample;
  int64_t first_head;
  int64_t total_heads;

  // Index of element (b, h, i, 0) of the mask, as runtime/cpu/attention.cc numbers it.
  __device__ uint64_t RowBase(int64_t b, int64_t h, int64_t i, int64_t seq) const {
    return static_cast<uint64_t>(((first_sample + b) * total_heads + first_head + h) * seq * seq +
                                 i * seq);
  }
  // M[i][j] for a mask row starting at `row_base`.
  __device__ float Mask(uint64_t row_base, int64_t j) const {
    return DropoutKeeps(key, row_base + static_cast<uint64_t>(j), p) ? scale : 0.0f;
  }
};

// Copies rows [first, first + kTile) of one head (columns [offset, offset + head_dim) of
// rows `ld` apart) into a [kTile][stride] fp32 tile, zero past `seq`.
template <typename T>
__device__ void LoadTile(const T* __restrict__ rows, int64_t ld, int64_t offset, int64_t first,
                         int64_t seq, int d, int stride, float* tile) {
  for (int idx = threadIdx.x; idx < kTile * d; idx += blockDim.x) {
    const int r = idx / d, c = idx - (idx / d) * d;
    const int64_t t = first + r;
    tile[r * stride + c] = t < seq ? Load(&rows[t * ld + offset + c]) : 0.0f;
  }
}

__device__ __forceinline__ float Dot(const float* a, const float* b, int d) {
  float s = 0.0f;
  for (int c = 0; c < d; ++c) s += a[c] * b[c];
  return s;
}

// Forward: block (query tile, head h, sample b). Online softmax per row i: over key tiles
//   m' = max(m, max_j S[i][j]),  l = l e^(m - m') + sum_j e^(S[i][j] - m'),
//   o = o e^(m - m') + sum_j M[i][j] e^(S[i][j] - m') V[j]
// and at the end O[i] = o / l, lse[i] = m + log l. (l sums the undropped weights:
// dropout applies to the normalised probabilities.)
template <typename T, int kDimsPerLane>
__global__ void __launch_bounds__(kWarps * 32)
    AttentionForwardKernel(Geometry geo, const T* __restrict__ qkv, float scale, Dropout drop,
                           float* __restrict__ lse, T* __restrict__ ctx) {
  extern __shared__ float smem[];
  const int d = static_cast<int>(geo.head_dim), kd = d + 1;
  const int dv = static_cast<int>(geo.value_dim), vd = dv + 1;
  float* q_s = smem;              // [kTile][d]
  float* k_s = q_s + kTile * d;   // [kTile][d + 1]
  float* v_s = k_s + kTile * kd;  // [kTile][dv + 1]
  const int64_t b = blockIdx.z, h = blockIdx.y, q_start = int64_t{blockIdx.x} * kTile;
  const int64_t g = h / geo.heads_per_group, seq = geo.seq;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const T* sample = qkv + b * seq * geo.ld;

  LoadTile(sample, geo.ld, geo.QueryOffset(h), q_start, seq, d, d, q_s);
  float m[kRowsPerWarp], l[kRowsPerWarp], o[kRowsPerWarp][kDimsPerLane];
#pragma unroll
  for (int rr = 0; rr < kRowsPerWarp; ++rr) {
    m[rr] = -INFINITY;
    l[rr] = 0.0f;
#pragma unroll
    for (int e = 0; e < kDimsPerLane; ++e) o[rr][e] = 0.0f;
  }

  const int64_t key_end = Min64(seq, q_start + kTile);  // causal: later keys are masked
  for (int64_t k_start = geo.FirstKeyTile(q_start); k_start < key_end; k_start += kTile) {
    __syncthreads();  // the previous tile's readers are done
    LoadTile(sample, geo.ld, geo.KeyOffset(g), k_start, seq, d, kd, k_s);
    LoadTile(sample, geo.ld, geo.ValueOffset(g), k_start, seq, dv, vd, v_s);
    __syncthreads();
#pragma unroll
    for (int rr = 0; rr < kRowsPerWarp; ++rr) {
      const int il = warp * kRowsPerWarp + rr;
      const int64_t i = q_start + il;
      if (i >= seq || k_start > i) continue;  // warp-uniform
      const int64_t j = k_start + lane;
      const bool valid = geo.Visible(b, i, j);
      const float s = valid ? scale * Dot(q_s + il * d, k_s + lane * kd, d) : -INFINITY;
      const float m_new = MaxOp{}(m[rr], WarpAllReduce(s, MaxOp{}));
      if (m_new == -INFINITY) continue;  // nothing visible yet (documents, window)
      const float p = valid ? expf(s - m_new) : 0.0f;
      const float correction = expf(m[rr] - m_new);  // 0 on the first tile (m = -inf)
      l[rr] = l[rr] * correction + WarpAllReduce(p, SumOp{});
      float p_used = p;
      if (drop.enabled && valid) p_used *= drop.Mask(drop.RowBase(b, h, i, seq), j);
#pragma unroll
      for (int e = 0; e < kDimsPerLane; ++e) o[rr][e] *= correction;
      const int last = static_cast<int>(Min64(kTile - 1, i - k_start));
      for (int jj = 0; jj <= last; ++jj) {
        const float pj = __shfl_sync(kFullMask, p_used, jj);
#pragma unroll
        for (int e = 0; e < kDimsPerLane; ++e) {
          const int c = lane + 32 * e;
          if (c < dv) o[rr][e] += pj * v_s[jj * vd + c];
        }
      }
      m[rr] = m_new;
    }
  }

#pragma unroll
  for (int rr = 0; rr < kRowsPerWarp; ++rr) {
    const int64_t i = q_start + warp * kRowsPerWarp + rr;
    if (i >= seq) continue;
    const float inv_l = 1.0f / l[rr];
    T* out = ctx + (b * seq + i) * geo.ld_ctx + geo.ContextOffset(h);
#pragma unroll
    for (int e = 0; e < kDimsPerLane; ++e) {
      const int c = lane + 32 * e;
      if (c < dv) Store(&out[c], o[rr][e] * inv_l);
    }
    if (lane == 0) lse[(b * geo.heads + h) * seq + i] = m[rr] + logf(l[rr]);
  }
}

// D[b, h, i] = sum_c dO[b, i, h, c] O[b, i, h, c]: one warp per (b, h, i) row.
template <typename T>
__global__ void RowDotKernel(Geometry geo, int64_t batch, const T* __restrict__ ctx,
                             const T* __restrict__ dctx, float* __restrict__ row_dot) {
  const int64_t warps_total = int64_t{gridDim.x} * (blockDim.x >> 5);
  const int lane = threadIdx.x & 31;
  for (int64_t w = int64_t{blockIdx.x} * (blockDim.x >> 5) + (threadIdx.x >> 5);
       w < batch * geo.heads * geo.seq; w += warps_total) {
    const int64_t i = w % geo.seq, bh = w / geo.seq;
    const int64_t h = bh % geo.heads, b = bh / geo.heads;
    const int64_t base = (b * geo.seq + i) * geo.ld_ctx + geo.ContextOffset(h);
    float s = 0.0f;
    for (int64_t c = lane; c < geo.value_dim; c += 32) {
      s += Load(&dctx[base + c]) * Load(&ctx[base + c]);
    }
    s = WarpAllReduce(s, SumOp{});
    if (lane == 0) row_dot[w] = s;
  }
}

// dQ: block (query tile, head h, sample b), keys up to the tile's last row. Per row i
// and key j (lane): P = exp(scale q_i.k_j - lse_i), dP' = dO_i.v_j,
// dS = P (M dP' - D_i), then dq_i += dS[i][j] k_j; finally dQ_i = scale dq_i.
template <typename T, int kDimsPerLane>
__global__ void __launch_bounds__(kWarps * 32)
    AttentionBackwardQueryKernel(Geometry geo, const T* __restrict__ qkv,
                                 const T* __restrict__ dctx, const float* __restrict__ lse,
                                 const float* __restrict__ row_dot, float scale, Dropout drop,
                                 T* __restrict__ dqkv) {
  extern __shared__ float smem[];
  const int d = static_cast<int>(geo.head_dim), kd = d + 1;
  const int dv = static_cast<int>(geo.value_dim), vd = dv + 1;
  float* q_s = smem;               // [kTile][d]
  float* do_s = q_s + kTile * d;   // [kTile][dv]
  float* k_s = do_s + kTile * dv;  // [kTile][d + 1]
  float* v_s = k_s + kTile * kd;   // [kTile][dv + 1]
  const int64_t b = blockIdx.z, h = blockIdx.y, q_start = int64_t{blockIdx.x} * kTile;
  const int64_t g = h / geo.heads_per_group, seq = geo.seq;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const T* sample = qkv + b * seq * geo.ld;

  LoadTile(sample, geo.ld, geo.QueryOffset(h), q_start, seq, d, d, q_s);
  LoadTile(dctx + b * seq * geo.ld_ctx, geo.ld_ctx, geo.ContextOffset(h), q_start, seq, dv, dv,
           do_s);
  float row_lse[kRowsPerWarp], row_d[kRowsPerWarp], dq[kRowsPerWarp][kDimsPerLane];
#pragma unroll
  for (int rr = 0; rr < kRowsPerWarp; ++rr) {
    const int64_t i = q_start + warp * kRowsPerWarp + rr;
    const int64_t stat = (b * geo.heads + h) * seq + i;
    row_lse[rr] = i < seq ? lse[stat] : 0.0f;
    row_d[rr] = i < seq ? row_dot[stat] : 0.0f;
#pragma unroll
    for (int e = 0; e < kDimsPerLane; ++e) dq[rr][e] = 0.0f;
  }

  const int64_t key_end = Min64(seq, q_start + kTile);
  for (int64_t k_start = geo.FirstKeyTile(q_start); k_start < key_end; k_start += kTile) {
    __syncthreads();
    LoadTile(sample, geo.ld, geo.KeyOffset(g), k_start, seq, d, kd, k_s);
    LoadTile(sample, geo.ld, geo.ValueOffset(g), k_start, seq, dv, vd, v_s);
    __syncthreads();
#pragma unroll
    for (int rr = 0; rr < kRowsPerWarp; ++rr) {
      const int il = warp * kRowsPerWarp + rr;
      const int64_t i = q_start + il;
      if (i >= seq || k_start > i) continue;  // warp-uniform
      const int64_t j = k_start + lane;
      float ds = 0.0f;
      if (geo.Visible(b, i, j)) {
        const float p = expf(scale * Dot(q_s + il * d, k_s + lane * kd, d) - row_lse[rr]);
        float dp = Dot(do_s + il * dv, v_s + lane * vd, dv);
        if (drop.enabled) dp *= drop.Mask(drop.RowBase(b, h, i, seq), j);
        ds = p * (dp - row_d[rr]);
      }
      const int last = static_cast<int>(Min64(kTile - 1, i - k_start));
      for (int jj = 0; jj <= last; ++jj) {
        const float dsj = __shfl_sync(kFullMask, ds, jj);
#pragma unroll
        for (int e = 0; e < kDimsPerLane; ++e) {
          const int c = lane + 32 * e;
          if (c < d) dq[rr][e] += dsj * k_s[jj * kd + c];
        }
      }
    }
  }

#pragma unroll
  for (int rr = 0; rr < kRowsPerWarp; ++rr) {
    const int64_t i = q_start + warp * kRowsPerWarp + rr;
    if (i >= seq) continue;
    T* out = dqkv + (b * seq + i) * geo.ld + geo.QueryOffset(h);
#pragma unroll
    for (int e = 0; e < kDimsPerLane; ++e) {
      const int c = lane + 32 * e;
      if (c < d) Store(&out[c], scale * dq[rr][e]);
    }
  }
}

// One query tile's share of the dK, dV kernel: for each of the warp's keys j and the
// tile's query rows i (lane), P, dP' and dS as in the dQ kernel, then
// dv_j += P'[i][j] dO_i and dk_j += dS[i][j] q_i. The tile's queries, their dO rows,
// log-sum-exps and row dots are in shared memory (q_s, do_s, lse_s, d_s).
template <int kDimsPerLane>
__device__ __forceinline__ void AccumulateKeyValueTile(
    const Geometry& geo, int64_t b, int64_t h, int64_t q_start, int64_t k_start, float scale,
    const Dropout& drop, const float* k_s, const float* v_s, const float* q_s, const float* do_s,
    const float* lse_s, const float* d_s, float (&dk)[kRowsPerWarp][kDimsPerLane],
    float (&dv_acc)[kRowsPerWarp][kDimsPerLane]) {
  const int d = static_cast<int>(geo.head_dim), kd = d + 1;
  const int dv = static_cast<int>(geo.value_dim), vd = dv + 1;
  const int64_t seq = geo.seq;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
#pragma unroll
  for (int rr = 0; rr < kRowsPerWarp; ++rr) {
    const int jl = warp * kRowsPerWarp + rr;
    const int64_t j = k_start + jl;
    if (j >= seq) continue;  // warp-uniform
    const int64_t i = q_start + lane;
    float p_used = 0.0f, ds = 0.0f;
    if (i < seq && geo.Visible(b, i, j)) {
      const float p = expf(scale * Dot(q_s + lane * kd, k_s + jl * d, d) - lse_s[lane]);
      float dp = Dot(do_s + lane * vd, v_s + jl * dv, dv);
      p_used = p;
      if (drop.enabled) {
        const float mask = drop.Mask(drop.RowBase(b, h, i, seq), j);
        p_used *= mask;
        dp *= mask;
      }
      ds = p * (dp - d_s[lane]);
    }
    // Rows i < j of this tile have P = 0: start at the first row that can see key j.
    const int first = static_cast<int>(Max64(0, j - q_start));
    for (int ii = first; ii < kTile; ++ii) {
      const float pi = __shfl_sync(kFullMask, p_used, ii);
      const float dsi = __shfl_sync(kFullMask, ds, ii);
#pragma unroll
      for (int e = 0; e < kDimsPerLane; ++e) {
        const int c = lane + 32 * e;
        if (c < dv) dv_acc[rr][e] += pi * do_s[ii * vd + c];
        if (c < d) dk[rr][e] += dsi * q_s[ii * kd + c];
      }
    }
  }
}

// dK, dV: block (key tile, group g, sample b); each warp owns 4 keys j, lane i is a query
// row of the current query tile. Over the group's heads and the query tiles from the
// key tile on (causal) to the last that its window reaches: P, M, dP' and dS as in the
// dQ kernel, then
//   dv_j += P'[i][j] dO_i,  dk_j += dS[i][j] q_i;  finally dK_j = scale dk_j, dV_j = dv_j.
// One block owns all of a key's gradient, so the heads of a group are summed without
// atomics, in a fixed order.
template <typename T, int kDimsPerLane>
__global__ void __launch_bounds__(kWarps * 32)
    AttentionBackwardKeyValueKernel(Geometry geo, const T* __restrict__ qkv,
                                    const T* __restrict__ dctx, const float* __restrict__ lse,
                                    const float* __restrict__ row_dot, float scale, Dropout drop,
                                    T* __restrict__ dqkv) {
  extern __shared__ float smem[];
  const int d = static_cast<int>(geo.head_dim), kd = d + 1;
  const int dv = static_cast<int>(geo.value_dim), vd = dv + 1;
  float* k_s = smem;               // [kTile][d]
  float* v_s = k_s + kTile * d;    // [kTile][dv]
  float* q_s = v_s + kTile * dv;   // [kTile][d + 1]
  float* do_s = q_s + kTile * kd;  // [kTile][dv + 1]
  float* lse_s = do_s + kTile * vd;
  float* d_s = lse_s + kTile;
  const int64_t b = blockIdx.z, g = blockIdx.y, k_start = int64_t{blockIdx.x} * kTile;
  const int64_t seq = geo.seq;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const T* sample = qkv + b * seq * geo.ld;
  const T* dsample = dctx + b * seq * geo.ld_ctx;

  LoadTile(sample, geo.ld, geo.KeyOffset(g), k_start, seq, d, d, k_s);
  LoadTile(sample, geo.ld, geo.ValueOffset(g), k_start, seq, dv, dv, v_s);
  float dk[kRowsPerWarp][kDimsPerLane], dv_acc[kRowsPerWarp][kDimsPerLane];
#pragma unroll
  for (int rr = 0; rr < kRowsPerWarp; ++rr) {
#pragma unroll
    for (int e = 0; e < kDimsPerLane; ++e) dk[rr][e] = dv_acc[rr][e] = 0.0f;
  }

  for (int64_t hh = 0; hh < geo.heads_per_group; ++hh) {
    const int64_t h = g * geo.heads_per_group + hh;
    for (int64_t q_start = k_start; q_start < geo.QueryEnd(k_start); q_start += kTile) {
      __syncthreads();
      LoadTile(sample, geo.ld, geo.QueryOffset(h), q_start, seq, d, kd, q_s);
      LoadTile(dsample, geo.ld_ctx, geo.ContextOffset(h), q_start, seq, dv, vd, do_s);
      if (threadIdx.x < kTile) {
        const int64_t i = q_start + threadIdx.x;
        const int64_t stat = (b * geo.heads + h) * seq + i;
        lse_s[threadIdx.x] = i < seq ? lse[stat] : 0.0f;
        d_s[threadIdx.x] = i < seq ? row_dot[stat] : 0.0f;
      }
      __syncthreads();
      AccumulateKeyValueTile<kDimsPerLane>(geo, b, h, q_start, k_start, scale, drop, k_s, v_s, q_s,
                                           do_s, lse_s, d_s, dk, dv_acc);
    }
  }

#pragma unroll
  for (int rr = 0; rr < kRowsPerWarp; ++rr) {
    const int64_t j = k_start + warp * kRowsPerWarp + rr;
    if (j >= seq) continue;
    T* row = dqkv + (b * seq + j) * geo.ld;
#pragma unroll
    for (int e = 0; e < kDimsPerLane; ++e) {
      const int c = lane + 32 * e;
      if (c < d) Store(&row[geo.KeyOffset(g) + c], scale * dk[rr][e]);
      if (c < dv) Store(&row[geo.ValueOffset(g) + c], dv_acc[rr][e]);
    }
  }
}

Geometry GeometryOf(const AttentionShape& s, const int32_t* document_start, int64_t window) {
  return {s.seq,         s.heads(),         s.heads_per_group, s.head_dim, s.value_dim(),
          s.qkv_width(), s.context_width(), document_start,    window};
}

Dropout DropoutOf(const AttentionDropoutArgs& a) {
  return {a.enabled,      a.key,        a.p,          a.enabled ? 1.0f / (1.0f - a.p) : 1.0f,
          a.first_sample, a.first_head, a.total_heads};
}

// Kernels needing more than the default 48 KiB of dynamic shared memory must opt in.
template <typename Kernel>
void AllowSharedMemory(Kernel kernel, size_t bytes) {
  if (bytes > 48 * 1024) {
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(bytes)));
  }
}

void CheckShape(const AttentionShape& s) {
  if (s.head_dim <= 0 || WidestAttentionHead(s) > kMaxAttentionHeadDim) {
    Fatal("Attention", "head_dim and value_dim must be in [1, 256] for the CUDA attention kernels");
  }
  if (s.heads() > 65535 || s.batch > 65535) Fatal("Attention", "too many heads or samples");
}

}  // namespace

void LaunchAttentionForward(DType dtype, const AttentionShape& shape, const void* qkv, float scale,
                            const AttentionDropoutArgs& dropout, const int32_t* document_start,
                            int64_t window, float* lse, void* ctx) {
  CheckShape(shape);
  if (shape.batch <= 0 || shape.seq <= 0 || shape.heads() <= 0) return;
  const Geometry geo = GeometryOf(shape, document_start, window);
  const Dropout drop = DropoutOf(dropout);
  const int d = static_cast<int>(shape.head_dim), dv = static_cast<int>(shape.value_dim());
  const size_t smem = sizeof(float) * (kTile * d + kTile * (d + 1) + kTile * (dv + 1));
  const dim3 grid(static_cast<unsigned>((shape.seq + kTile - 1) / kTile),
                  static_cast<unsigned>(shape.heads()), static_cast<unsigned>(shape.batch));
  Dispatch(dtype, [&](auto t) {
    using T = typename decltype(t)::type;
    DispatchDimsPerLane(WidestAttentionHead(shape), [&](auto dims) {
      auto kernel = AttentionForwardKernel<T, decltype(dims)::value>;
      AllowSharedMemory(kernel, smem);
      kernel<<<grid, kWarps * 32, smem>>>(geo, static_cast<const T*>(qkv), scale, drop, lse,
                                          static_cast<T*>(ctx));
    });
  });
  CUDA_CHECK_LAUNCH("AttentionForwardKernel");
}

void LaunchAttentionBackward(DType dtype, const AttentionShape& shape, const void* qkv,
                             const float* lse, const void* ctx, const void* dctx, float scale,
                             const AttentionDropoutArgs& dropout, const int32_t* document_start,
                             int64_t window, float* row_dot, void* dqkv) {
  CheckShape(shape);
  if (shape.batch <= 0 || shape.seq <= 0 || shape.heads() <= 0) return;
  const Geometry geo = GeometryOf(shape, document_start, window);
  const Dropout drop = DropoutOf(dropout);
  const int d = static_cast<int>(shape.head_dim), dv = static_cast<int>(shape.value_dim());
  const unsigned tiles = static_cast<unsigned>((shape.seq + kTile - 1) / kTile);
  // The dQ kernel's tiles and the dK, dV kernel's hold the same floats, padded alike.
  const size_t smem_q = sizeof(float) * kTile * (d + dv + (d + 1) + (dv + 1));
  const size_t smem_kv = smem_q + sizeof(float) * 2 * kTile;
  const int64_t rows = shape.batch * shape.heads() * shape.seq;
  Dispatch(dtype, [&](auto t) {
    using T = typename decltype(t)::type;
    const T* q = static_cast<const T*>(qkv);
    const T* o = static_cast<const T*>(ctx);
    const T* d_o = static_cast<const T*>(dctx);
    T* dq = static_cast<T*>(dqkv);
    const unsigned row_blocks =
        static_cast<unsigned>(Min64((rows + kWarps - 1) / kWarps, kMaxBlocks));
    RowDotKernel<<<row_blocks, kWarps * 32>>>(geo, shape.batch, o, d_o, row_dot);
    CUDA_CHECK_LAUNCH("RowDotKernel");
    DispatchDimsPerLane(WidestAttentionHead(shape), [&](auto dims) {
      auto query_kernel = AttentionBackwardQueryKernel<T, decltype(dims)::value>;
      AllowSharedMemory(query_kernel, smem_q);
      query_kernel<<<dim3(tiles, static_cast<unsigned>(shape.heads()),
                          static_cast<unsigned>(shape.batch)),
                     kWarps * 32, smem_q>>>(geo, q, d_o, lse, row_dot, scale, drop, dq);
      CUDA_CHECK_LAUNCH("AttentionBackwardQueryKernel");
      auto kv_kernel = AttentionBackwardKeyValueKernel<T, decltype(dims)::value>;
      AllowSharedMemory(kv_kernel, smem_kv);
      kv_kernel<<<dim3(tiles, static_cast<unsigned>(shape.groups),
                       static_cast<unsigned>(shape.batch)),
                  kWarps * 32, smem_kv>>>(geo, q, d_o, lse, row_dot, scale, drop, dq);
      CUDA_CHECK_LAUNCH("AttentionBackwardKeyValueKernel");
    });
  });
}

}  // namespace conveyor::cuda
