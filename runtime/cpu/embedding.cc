#include "runtime/cpu/embedding.h"

#include <algorithm>

#include "runtime/cpu/thread_pool.h"

namespace conveyor::cpu {
namespace {

constexpr int64_t kGrain = 16;  // rows (forward) or columns (gradient) per pool task

}  // namespace

void EmbeddingForward(const float* table, int64_t vocab_start, int64_t vocab_rows,
                      const int32_t* ids, int64_t count, int64_t width, float* out) {
  ParallelFor(count, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t row = ids[t] - vocab_start;
      float* o = out + t * width;
      if (row < 0 || row >= vocab_rows) {
        std::fill(o, o + width, 0.0f);
        continue;
      }
      std::copy(table + row * width, table + (row + 1) * width, o);
    }
  });
}

void EmbeddingBackwardWeight(const float* dout, int64_t vocab_start, int64_t vocab_rows,
                             const int32_t* ids, int64_t count, int64_t width, float* dtable) {
  // Split by columns: a repeated id's rows still add in increasing t, whatever the threads.
  ParallelFor(width, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t t = 0; t < count; ++t) {
      const int64_t row = ids[t] - vocab_start;
      if (row < 0 || row >= vocab_rows) continue;
      float* d = dtable + row * width;
      const float* g = dout + t * width;
      for (int64_t i = begin; i < end; ++i) d[i] += g[i];
    }
  });
}

}  // namespace conveyor::cpu
