#include "runtime/cpu/bf16_row_chunks.h"

#include <algorithm>
#include <vector>

#include "runtime/cpu/bf16_convert.h"
#include "runtime/cpu/thread_pool.h"

namespace conveyor::cpu {

float* ChunkBuffer(int slot, int64_t count) {
  thread_local std::vector<float> buffers[kChunkBuffers];
  std::vector<float>& buffer = buffers[slot];
  if (static_cast<int64_t>(buffer.size()) < count) buffer.resize(count);
  return buffer.data();
}

void ForRowChunks(int64_t rows, int64_t width, bool parallel,
                  absl::FunctionRef<void(int64_t, int64_t)> fn) {
  const int64_t chunk = std::max<int64_t>(1, kChunkValues / std::max<int64_t>(width, 1));
  auto run = [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; b += chunk) fn(b, std::min(end, b + chunk));
  };
  if (parallel) {
    ParallelFor(rows, chunk, run);
  } else {
    run(0, rows);
  }
}

float* WideRows(const BFloat16* x, int64_t width, int64_t begin, int64_t end, int slot) {
  float* wide = ChunkBuffer(slot, (end - begin) * width);
  WidenBf16(x + begin * width, (end - begin) * width, wide);
  return wide;
}

}  // namespace conveyor::cpu
