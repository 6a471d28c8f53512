#include "runtime/caching_allocator.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

#include "absl/strings/str_cat.h"

namespace conveyor {
namespace {

int64_t RoundUp(int64_t n, int64_t multiple) { return (n + multiple - 1) / multiple * multiple; }

}  // namespace

bool CachingAllocator::BySizeThenAddress::operator()(const Block* a, const Block* b) const {
  if (a->size != b->size) return a->size < b->size;
  return std::less<char*>()(a->ptr, b->ptr);
}

CachingAllocator::CachingAllocator(RawDeviceAllocator* backing) : backing_(backing) {}

CachingAllocator::~CachingAllocator() {
  std::vector<Block*> heads;
  for (const FreeList& list : free_) {
    for (Block* b : list) {
      if (b->prev == nullptr) heads.push_back(b);
    }
  }
  for (const auto& [ptr, b] : allocated_) {
    if (b->prev == nullptr) heads.push_back(b);
  }
  for (Block* head : heads) {
    int64_t segment = 0;
    for (Block* b = head; b != nullptr; b = b->next) segment += b->size;
    backing_->Release(head->ptr, segment);
    for (Block* b = head; b != nullptr;) {
      Block* next = b->next;
      delete b;
      b = next;
    }
  }
}

int64_t CachingAllocator::RoundedSize(int64_t bytes) {
  return std::max(kBlockRounding, RoundUp(bytes, kBlockRounding));
}

int64_t CachingAllocator::SegmentSize(int64_t rounded) {
  switch (PoolFor(rounded)) {
    case Pool::kSmall:
      return kSmallSegment;
    case Pool::kMedium:
      return kMediumSegment;
    case Pool::kLarge:
      break;
  }
  return RoundUp(rounded, kLargeSegmentRounding);
}

CachingAllocator::Pool CachingAllocator::PoolFor(int64_t rounded) {
  if (rounded <= kSmallRequest) return Pool::kSmall;
  return rounded < kLargeRequest ? Pool::kMedium : Pool::kLarge;
}

bool CachingAllocator::ShouldSplit(Pool pool, int64_t remainder) {
  switch (pool) {
    case Pool::kSmall:  // any remainder can serve the smallest request
      return remainder >= kBlockRounding;
    case Pool::kMedium:
      // A remainder of kSmallRequest or less could only serve small requests, which have
      // their own pool: it would be dead space, so it stays in the block.
      return remainder > kSmallRequest;
    case Pool::kLarge:  // never: see the class comment
      break;
  }
  return false;
}

CachingAllocator::Block* CachingAllocator::TakeCachedBlockLocked(Pool pool, int64_t rounded) {
  FreeList& list = FreeListOf(pool);
  // A large request takes only a block of its own segment size.
  const int64_t wanted = pool == Pool::kLarge ? SegmentSize(rounded) : rounded;
  Block key{nullptr, wanted, pool};
  auto it = list.lower_bound(&key);
  if (it == list.end() || (pool == Pool::kLarge && (*it)->size != wanted)) return nullptr;
  Block* block = *it;
  list.erase(it);
  return block;
}

absl::StatusOr<void*> CachingAllocator::Allocate(int64_t bytes) {
  if (bytes < 0) return absl::InvalidArgumentError(absl::StrCat("negative size ", bytes));
  if (bytes > kMaxRequest) {
    return absl::ResourceExhaustedError(absl::StrCat(bytes, " bytes is more than any device has"));
  }
  const int64_t rounded = RoundedSize(bytes);
  const Pool pool = PoolFor(rounded);
  std::lock_guard<std::mutex> lock(mu_);
  Block* block = TakeCachedBlockLocked(pool, rounded);
  if (block == nullptr) {
    absl::StatusOr<Block*> segment = NewSegmentLocked(pool, rounded, bytes);
    if (!segment.ok()) return segment.status();
    block = *segment;
  }

  const int64_t remainder = block->size - rounded;
  if (ShouldSplit(pool, remainder)) {
    Block* rest = new Block{block->ptr + rounded, remainder, pool};
    rest->prev = block;
    rest->next = block->next;
    if (block->next != nullptr) block->next->prev = rest;
    block->next = rest;
    block->size = rounded;
    FreeListOf(pool).insert(rest);
  }

  block->allocated = true;
  block->requested = bytes;
  allocated_[block->ptr] = block;
  stats_.bytes_in_use += block->size;
  stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
  stats_.bytes_requested += bytes;
  ++stats_.blocks_in_use;
  ++stats_.num_allocations;
  return static_cast<void*>(block->ptr);
}

absl::StatusOr<CachingAllocator::Block*> CachingAllocator::NewSegmentLocked(Pool pool,
                                                                            int64_t rounded,
                                                                            int64_t bytes) {
  const int64_t size = SegmentSize(rounded);
  void* p = backing_->Allocate(size);
  if (p == nullptr) {
    // Cached segments may be what fills the device (e.g. small-pool segments when a large
    // block is wanted): hand them back and try once more, as PyTorch does.
    ++stats_.num_backing_failures;
    ReleaseCachedSegmentsLocked();
    p = backing_->Allocate(size);
    if (p == nullptr) {
      ++stats_.num_backing_failures;
      return absl::ResourceExhaustedError(absl::StrCat(
          "out of device memory: a request of ", bytes, " bytes needs a new segment of ", size,
          " bytes, and the device has no room for it even with the allocator's cache released"));
    }
  }
  if (reinterpret_cast<uintptr_t>(p) % kAlignment != 0) {
    backing_->Release(p, size);
    return absl::InternalError(absl::StrCat(
        "the backing allocator returned a segment not aligned to ", kAlignment, " bytes"));
  }
  ++stats_.num_backing_allocations;
  ++stats_.segments;
  stats_.bytes_reserved += size;
  stats_.peak_bytes_reserved = std::max(stats_.peak_bytes_reserved, stats_.bytes_reserved);
  return new Block{static_cast<char*>(p), size, pool};
}

absl::Status CachingAllocator::Free(void* p) {
  if (p == nullptr) return absl::OkStatus();
  std::lock_guard<std::mutex> lock(mu_);
  auto it = allocated_.find(p);
  if (it == allocated_.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("freeing ", reinterpret_cast<uintptr_t>(p),
                     ", which is not a block in use (freed twice, or not from this allocator)"));
  }
  Block* block = it->second;
  allocated_.erase(it);
  stats_.bytes_in_use -= block->size;
  stats_.bytes_requested -= block->requested;
  --stats_.blocks_in_use;
  block->allocated = false;
  block->requested = 0;

  // Merge with free neighbours of the same segment (the list holds only that segment), so
  // a segment whose blocks are all free is one block again, reusable whole or releasable.
  FreeList& list = FreeListOf(block->pool);
  if (Block* prev = block->prev; prev != nullptr && !prev->allocated) {
    list.erase(prev);
    prev->size += block->size;
    prev->next = block->next;
    if (block->next != nullptr) block->next->prev = prev;
    delete block;
    block = prev;
  }
  if (Block* next = block->next; next != nullptr && !next->allocated) {
    list.erase(next);
    block->size += next->size;
    block->next = next->next;
    if (next->next != nullptr) next->next->prev = block;
    delete next;
  }
  list.insert(block);
  return absl::OkStatus();
}

void CachingAllocator::EmptyCache() {
  std::lock_guard<std::mutex> lock(mu_);
  ReleaseCachedSegmentsLocked();
}

void CachingAllocator::ReleaseCachedSegmentsLocked() {
  for (FreeList& list : free_) {
    for (auto it = list.begin(); it != list.end();) {
      Block* b = *it;
      // Free blocks are always merged, so a segment with nothing in use is a single block.
      if (b->prev != nullptr || b->next != nullptr) {
        ++it;
        continue;
      }
      it = list.erase(it);
      backing_->Release(b->ptr, b->size);
      ++stats_.num_backing_releases;
      --stats_.segments;
      stats_.bytes_reserved -= b->size;
      delete b;
    }
  }
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void CachingAllocator::ResetPeaks() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.peak_bytes_in_use = stats_.bytes_in_use;
  stats_.peak_bytes_reserved = stats_.bytes_reserved;
}

}  // namespace conveyor
