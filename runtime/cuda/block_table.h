// Multi-tensor launches (nvcc only): one grid covers several arrays, array k owning the
// blocks [first_block_k, first_block_{k+1}) with first_block increasing along a table in
// device memory. Each block finds its array by binary search, in O(log count).
#ifndef CONVEYOR_RUNTIME_CUDA_BLOCK_TABLE_H_
#define CONVEYOR_RUNTIME_CUDA_BLOCK_TABLE_H_

#if !defined(__CUDACC__)
#error "block_table.h is for .cu files"
#endif

#include <cstdint>

namespace conveyor {

// The index of the entry (of `count`, each with a first_block member) owning `block`.
template <typename Entry>
__device__ __forceinline__ int EntryOfBlock(const Entry* table, int count, int64_t block) {
  int lo = 0, hi = count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (table[mid].first_block <= block) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

}  // namespace conveyor

#endif  // CONVEYOR_RUNTIME_CUDA_BLOCK_TABLE_H_
