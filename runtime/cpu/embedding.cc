#include "runtime/cpu/embedding.h"

namespace conveyor::cpu {

void EmbeddingForward(const float* table, const int32_t* ids, int64_t count, int64_t width,
                      bool accumulate, float* out) {
  for (int64_t t = 0; t < count; ++t) {
    const float* row = table + static_cast<int64_t>(ids[t]) * width;
    float* o = out + t * width;
    for (int64_t i = 0; i < width; ++i) o[i] = accumulate ? o[i] + row[i] : row[i];
  }
}

void EmbeddingBackwardWeight(const float* dout, const int32_t* ids, int64_t count,
                             int64_t width, float* dtable) {
  for (int64_t t = 0; t < count; ++t) {
    float* row = dtable + static_cast<int64_t>(ids[t]) * width;
    const float* d = dout + t * width;
    for (int64_t i = 0; i < width; ++i) row[i] += d[i];
  }
}

}  // namespace conveyor::cpu
