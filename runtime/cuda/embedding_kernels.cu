#include <algorithm>

#include "runtime/cuda/device_math.h"
#include "runtime/cuda/embedding_kernels.h"

namespace conveyor::cuda {
namespace {

// out[t, c] = table[ids[t] - vocab_start, c] if 0 <= ids[t] - vocab_start < table_rows else 0
template <typename T, typename W>
__global__ void EmbeddingForwardKernel(const W* __restrict__ table, int64_t vocab_start,
                                       int64_t table_rows, int64_t width,
                                       const int32_t* __restrict__ ids, int64_t count,
                                       T* __restrict__ out) {
  for (int64_t t = blockIdx.x; t < count; t += gridDim.x) {
    const int64_t row = static_cast<int64_t>(ids[t]) - vocab_start;
    const bool in_range = row >= 0 && row < table_rows;
    T* o = out + t * width;
    for (int64_t c = threadIdx.x; c < width; c += blockDim.x) {
      Store(&o[c], in_range ? Load(&table[row * width + c]) : 0.0f);
    }
  }
}

// For occurring row u (block): dtable[rows[u], c] += sum_{k in [offsets[u], offsets[u+1])}
// dout[tokens[k], c], added one token at a time in increasing token order.
template <typename T>
__global__ void EmbeddingBackwardKernel(const T* __restrict__ dout, int64_t width,
                                        const int32_t* __restrict__ packed, int64_t num_rows,
                                        float* __restrict__ dtable) {
  const int32_t* rows = packed;
  const int32_t* offsets = packed + num_rows;
  const int32_t* tokens = offsets + num_rows + 1;
  for (int64_t u = blockIdx.x; u < num_rows; u += gridDim.x) {
    float* d = dtable + static_cast<int64_t>(rows[u]) * width;
    for (int64_t c = threadIdx.x; c < width; c += blockDim.x) {
      float acc = d[c];
      for (int32_t k = offsets[u]; k < offsets[u + 1]; ++k) {
        acc += Load(&dout[static_cast<int64_t>(tokens[k]) * width + c]);
      }
      d[c] = acc;
    }
  }
}

unsigned int LoopBlocks(int64_t n) {
  return static_cast<unsigned int>(std::max<int64_t>(1, std::min<int64_t>(n, kMaxBlocks)));
}

}  // namespace

void LaunchEmbeddingForward(DType out_dtype, DType table_dtype, const void* table,
                            int64_t vocab_start, int64_t table_rows, int64_t width,
                            const int32_t* ids, int64_t count, void* out) {
  if (count <= 0 || width <= 0) return;
  Dispatch2(out_dtype, table_dtype, [&](auto t, auto w) {
    using T = typename decltype(t)::type;
    using W = typename decltype(w)::type;
    EmbeddingForwardKernel<<<LoopBlocks(count), RowThreads(width)>>>(
        static_cast<const W*>(table), vocab_start, table_rows, width, ids, count,
        static_cast<T*>(out));
  });
  CUDA_CHECK_LAUNCH("EmbeddingForwardKernel");
}

// A sort of (row, token) keys on the host: the ids are host data already, and a
// micro-batch's few thousand tokens sort in well under a millisecond, so the device
// needs neither a sort nor atomics, and the result does not depend on scheduling.
EmbeddingGradPlan PlanEmbeddingGrad(const int32_t* ids, int64_t count, int64_t vocab_start,
                                    int64_t table_rows) {
  std::vector<int64_t> keys;
  keys.reserve(count);
  for (int64_t t = 0; t < count; ++t) {
    const int64_t row = static_cast<int64_t>(ids[t]) - vocab_start;
    if (row >= 0 && row < table_rows) keys.push_back((row << 32) | t);
  }
  std::sort(keys.begin(), keys.end());
  std::vector<int32_t> rows, offsets, tokens;
  tokens.reserve(keys.size());
  for (const int64_t key : keys) {
    const int32_t row = static_cast<int32_t>(key >> 32);
    if (rows.empty() || rows.back() != row) {
      rows.push_back(row);
      offsets.push_back(static_cast<int32_t>(tokens.size()));
    }
    tokens.push_back(static_cast<int32_t>(key & 0xffffffff));
  }
  offsets.push_back(static_cast<int32_t>(tokens.size()));
  EmbeddingGradPlan plan;
  plan.num_rows = static_cast<int64_t>(rows.size());
  plan.packed.reserve(rows.size() + offsets.size() + tokens.size());
  plan.packed.insert(plan.packed.end(), rows.begin(), rows.end());
  plan.packed.insert(plan.packed.end(), offsets.begin(), offsets.end());
  plan.packed.insert(plan.packed.end(), tokens.begin(), tokens.end());
  return plan;
}

void LaunchEmbeddingBackwardWeight(DType dout_dtype, const void* dout, int64_t width,
                                   const int32_t* packed, int64_t num_rows, float* dtable) {
  if (num_rows <= 0 || width <= 0) return;
  Dispatch(dout_dtype, [&](auto t) {
    using T = typename decltype(t)::type;
    EmbeddingBackwardKernel<<<LoopBlocks(num_rows), RowThreads(width)>>>(
        static_cast<const T*>(dout), width, packed, num_rows, dtable);
  });
  CUDA_CHECK_LAUNCH("EmbeddingBackwardKernel");
}

}  // namespace conveyor::cuda
