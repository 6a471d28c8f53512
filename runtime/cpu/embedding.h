// Table lookup and its gradient for a table that may hold only the vocabulary rows
// [vocab_start, vocab_start + rows) (Megatron's vocab-parallel embedding): ids outside
// that range give zero rows here, and the ranks' outputs are summed by the caller.
//   out[t] = table[ids[t] - vocab_start],   dtable[ids[t] - vocab_start] += dout[t]
#ifndef CONVEYOR_RUNTIME_CPU_EMBEDDING_H_
#define CONVEYOR_RUNTIME_CPU_EMBEDDING_H_

#include <cstdint>

namespace conveyor::cpu {

void EmbeddingForward(const float* table, int64_t vocab_start, int64_t vocab_rows,
                      const int32_t* ids, int64_t count, int64_t width, float* out);

void EmbeddingBackwardWeight(const float* dout, int64_t vocab_start, int64_t vocab_rows,
                             const int32_t* ids, int64_t count, int64_t width, float* dtable);

}  // namespace conveyor::cpu

#endif  // CONVEYOR_RUNTIME_CPU_EMBEDDING_H_
