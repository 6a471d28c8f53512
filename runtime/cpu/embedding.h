// Table lookup and its gradient: out[t] = table[ids[t]]; dtable[ids[t]] += dout[t].
#ifndef CONVEYOR_RUNTIME_CPU_EMBEDDING_H_
#define CONVEYOR_RUNTIME_CPU_EMBEDDING_H_

#include <cstdint>

namespace conveyor::cpu {

// accumulate = true adds into out (token + position embeddings share one buffer).
void EmbeddingForward(const float* table, const int32_t* ids, int64_t count, int64_t width,
                      bool accumulate, float* out);

void EmbeddingBackwardWeight(const float* dout, const int32_t* ids, int64_t count,
                             int64_t width, float* dtable);

}  // namespace conveyor::cpu

#endif  // CONVEYOR_RUNTIME_CPU_EMBEDDING_H_
