#include "runtime/cuda/staging_buffer.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "runtime/cuda/cuda_check.h"

namespace conveyor::cuda {

StagingBuffer::~StagingBuffer() {
  if (data_ != nullptr) cudaFree(data_);  // best effort: may run after the context is gone
}

void* StagingBuffer::TryReserve(int64_t bytes) {
  if (bytes <= capacity_ && data_ != nullptr) return data_;
  // Grow by at least half again, so a slowly growing request does not reallocate often;
  // when that much does not fit, just what was asked for.
  const int64_t grown = std::max<int64_t>({bytes, capacity_ + capacity_ / 2, 256});
  if (data_ != nullptr) CUDA_CHECK(cudaFree(data_));
  data_ = nullptr;
  capacity_ = 0;
  for (const int64_t capacity : {grown, std::max<int64_t>(bytes, 256)}) {
    const cudaError_t err = cudaMalloc(&data_, static_cast<size_t>(capacity));
    if (err == cudaSuccess) {
      capacity_ = capacity;
      return data_;
    }
    if (err != cudaErrorMemoryAllocation) CUDA_CHECK(err);
    cudaGetLastError();  // out of memory is not sticky: clear it for later checks
    data_ = nullptr;
  }
  return nullptr;
}

void* StagingBuffer::Reserve(int64_t bytes) {
  void* data = TryReserve(bytes);
  if (data == nullptr) {
    std::fprintf(stderr,
                 "conveyor: CUDA out of memory reserving a %lld-byte staging buffer; reduce "
                 "--micro-batch-size or --seq-length, or recompute activations "
                 "(--recompute-granularity)\n",
                 static_cast<long long>(bytes));
    std::exit(1);
  }
  return data;
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
