// Vocabulary-parallel embedding on the device (runtime/cpu/embedding.h): a gather for
// forward, and for the weight gradient a deterministic, atomic-free segmented sum.
#ifndef CONVEYOR_RUNTIME_CUDA_EMBEDDING_KERNELS_H_
#define CONVEYOR_RUNTIME_CUDA_EMBEDDING_KERNELS_H_

#include <cstdint>
#include <vector>

#include "runtime/dtype.h"

namespace conveyor::cuda {

// out[t, :] = table[ids[t] - vocab_start, :] when that row is one of `table_rows`,
// else 0. ids: device int32 [count].
void LaunchEmbeddingForward(DType out_dtype, DType table_dtype, const void* table,
                            int64_t vocab_start, int64_t table_rows, int64_t width,
                            const int32_t* ids, int64_t count, void* out);

// The host-side plan of the weight gradient, built from the (host) token ids: the table
// rows that occur, and for each the tokens that hit it in increasing order, packed as
// one int32 array [rows (n) | offsets (n + 1) | tokens], ready for one upload.
struct EmbeddingGradPlan {
  int64_t num_rows = 0;
  std::vector<int32_t> packed;
};
EmbeddingGradPlan PlanEmbeddingGrad(const int32_t* ids, int64_t count, int64_t vocab_start,
                                    int64_t table_rows);

// dtable[row, :] += sum of dout[token, :] over the plan's tokens of each row, in token
// order (the CPU's order): one block per occurring row, so no two threads touch the
// same gradient element. packed: the plan's array on the device.
void LaunchEmbeddingBackwardWeight(DType dout_dtype, const void* dout, int64_t width,
                                   const int32_t* packed, int64_t num_rows, float* dtable);

}  // namespace conveyor::cuda

#endif  // CONVEYOR_RUNTIME_CUDA_EMBEDDING_KERNELS_H_
