#include "runtime/cuda/staging_buffer.h"

#include <cuda_runtime_api.h>

#include <algorithm>

#include "runtime/cuda/cuda_check.h"

namespace conveyor::cuda {

StagingBuffer::~StagingBuffer() {
  if (data_ != nullptr) cudaFree(data_);  // best effort: may run after the context is gone
}

void* StagingBuffer::Reserve(int64_t bytes) {
  if (bytes <= capacity_ && data_ != nullptr) return data_;
  // Grow by at least half again, so a slowly growing request does not reallocate often.
  const int64_t capacity = std::max<int64_t>({bytes, capacity_ + capacity_ / 2, 256});
  if (data_ != nullptr) CUDA_CHECK(cudaFree(data_));
  CUDA_CHECK(cudaMalloc(&data_, static_cast<size_t>(capacity)));
  capacity_ = capacity;
  return data_;
}

void* StagingBuffer::UploadBytes(const void* host, int64_t bytes) {
  void* device = Reserve(bytes);
  if (bytes > 0) {
    CUDA_CHECK(cudaMemcpy(device, host, static_cast<size_t>(bytes), cudaMemcpyHostToDevice));
  }
  return device;
}

void StagingBuffer::DownloadBytes(void* host, int64_t bytes) const {
  if (bytes > 0) {
    CUDA_CHECK(cudaMemcpy(host, data_, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost));
  }
}

}  // namespace conveyor::cuda
