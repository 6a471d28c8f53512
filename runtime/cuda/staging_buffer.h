// A grow-only device buffer for what ops upload from the host (token ids, labels, RoPE
// tables, per-row statistics) or compute for the host to download. It is reused across
// calls, so a steady-state step makes no cudaMalloc for them.
//
// Uploads are cudaMemcpy on the legacy default stream, which waits for earlier kernels
// on stream 0 before overwriting the buffer: reuse needs no other synchronisation while
// every user runs on stream 0.
#ifndef CONVEYOR_RUNTIME_CUDA_STAGING_BUFFER_H_
#define CONVEYOR_RUNTIME_CUDA_STAGING_BUFFER_H_

#include <cstdint>

namespace conveyor::cuda {

class StagingBuffer {
 public:
  StagingBuffer() = default;
  ~StagingBuffer();
  StagingBuffer(const StagingBuffer&) = delete;
  StagingBuffer& operator=(const StagingBuffer&) = delete;

  // At least `bytes` bytes of device memory (contents undefined after a growth); ends the
  // process with a message when the device has no room for them.
  void* Reserve(int64_t bytes);
  // As Reserve, but null when the device has no room (the buffer is then empty), for a
  // caller with another way to do its work.
  void* TryReserve(int64_t bytes);

  // Copies `count` host elements to the start of the buffer and returns its address.
  template <typename T>
  T* Upload(const T* host, int64_t count) {
    return static_cast<T*>(UploadBytes(host, count * static_cast<int64_t>(sizeof(T))));
  }

  // Copies the buffer's first `count` elements to the host (waits for the device).
  template <typename T>
  void Download(T* host, int64_t count) const {
    DownloadBytes(host, count * static_cast<int64_t>(sizeof(T)));
  }

 private:
  void* UploadBytes(const void* host, int64_t bytes);
  void DownloadBytes(void* host, int64_t bytes) const;

  void* data_ = nullptr;
  int64_t capacity_ = 0;
};

}  // namespace conveyor::cuda

#endif  // CONVEYOR_RUNTIME_CUDA_STAGING_BUFFER_H_
