// How the --bf16 CPU ops (runtime/cpu/cpu_bf16_ops.h) read bf16 tensors: a chunk of rows
// at a time, widened into a worker's fp32 buffers sized for L2 and reused from call to
// call (as cuBLASLt's workspace is), where the emulation widens whole tensors into new
// ones whose host pages are faulted in and NaN-filled at every call. Each buffer holds
// max(kChunkValues, one row) values: a few hundred KiB per thread, however large the
// tensors.
#ifndef CONVEYOR_RUNTIME_CPU_BF16_ROW_CHUNKS_H_
#define CONVEYOR_RUNTIME_CPU_BF16_ROW_CHUNKS_H_

#include <cstdint>

#include "absl/functional/function_ref.h"
#include "runtime/dtype.h"

namespace conveyor::cpu {

// The values of one chunk (128 KiB of fp32).
inline constexpr int64_t kChunkValues = int64_t{1} << 15;
// The buffers each thread has.
inline constexpr int kChunkBuffers = 3;

// The calling thread's fp32 buffer number `slot` (below kChunkBuffers), holding at
// least `count` values.
float* ChunkBuffer(int slot, int64_t count);

// fn(begin, end) over [0, rows) in chunks of max(1, kChunkValues / width) rows: on the
// pool's threads when `parallel`, else in order on the calling thread (for sums over
// rows, which must not depend on the threads).
void ForRowChunks(int64_t rows, int64_t width, bool parallel,
                  absl::FunctionRef<void(int64_t, int64_t)> fn);

// Rows [begin, end) of the bf16 [rows, width] array `x`, widened into the calling
// thread's buffer `slot`.
float* WideRows(const BFloat16* x, int64_t width, int64_t begin, int64_t end, int slot);

}  // namespace conveyor::cpu

#endif  // CONVEYOR_RUNTIME_CPU_BF16_ROW_CHUNKS_H_
