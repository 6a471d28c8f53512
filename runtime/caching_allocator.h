// A caching allocator for device memory, after PyTorch's CUDA caching allocator.
//
// cudaMalloc and cudaFree are slow (cudaFree synchronizes the whole device), and a training
// step allocates and frees the same activation and gradient buffers every micro-batch. This
// allocator takes big segments from a backing allocator, carves them into blocks, and keeps
// freed blocks for reuse, so that once the first iteration has warmed the cache the steady
// state makes no backing calls at all (stats().num_backing_allocations stops moving).
//
// It knows nothing of CUDA: the backing is abstract, so the policy is tested on the CPU with
// a fake backing, and runtime/cuda/cuda_memory.cc puts cudaMalloc/cudaFree behind it.
//
// Not stream-aware: a freed block may be handed out again at once. That is safe while every
// kernel and copy that touches these blocks runs on one stream (the default stream, for
// now), because the stream orders the new user after the old one. Work on other streams
// (e.g. NCCL) must finish with a block before the block is freed, or this allocator needs
// PyTorch's per-stream pools and recorded events.
#ifndef CONVEYOR_RUNTIME_CACHING_ALLOCATOR_H_
#define CONVEYOR_RUNTIME_CACHING_ALLOCATOR_H_

#include <cstdint>
#include <mutex>
#include <set>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace conveyor {

// Where the segments come from (cudaMalloc/cudaFree on a GPU).
class RawDeviceAllocator {
 public:
  virtual ~RawDeviceAllocator() = default;
  // `bytes` bytes aligned to at least CachingAllocator::kAlignment, or nullptr when the
  // device is out of memory. Other failures are the backing's to report.
  virtual void* Allocate(int64_t bytes) = 0;
  // Returns a segment from Allocate, with the size it was allocated with.
  virtual void Release(void* p, int64_t bytes) = 0;
};

struct AllocatorStats {
  int64_t bytes_in_use = 0;  // blocks handed out and not yet freed, at their rounded size
  int64_t peak_bytes_in_use = 0;
  int64_t bytes_requested = 0;  // what callers asked for (<= bytes_in_use: rounding, no split)
  int64_t bytes_reserved = 0;   // held from the backing: in use + cached
  int64_t peak_bytes_reserved = 0;
  int64_t blocks_in_use = 0;
  int64_t segments = 0;                 // segments held from the backing now
  int64_t num_allocations = 0;          // successful Allocate calls
  int64_t num_backing_allocations = 0;  // successful backing Allocate calls (cudaMalloc)
  int64_t num_backing_releases = 0;     // backing Release calls (cudaFree)
  int64_t num_backing_failures = 0;     // backing Allocate calls that returned nullptr
};

// Three pools, each with its own segments, so that one size class never fragments another:
//   small  (<= 1 MiB: norm statistics, losses, biases): 2 MiB segments, split down to 512 B;
//   medium (1-10 MiB): 20 MiB segments, split when the remainder is over 1 MiB;
//   large  (>= 10 MiB: activations, weights, gradient buckets): a segment per block, rounded
//          up to 2 MiB, never split, and reused only by requests of the same rounded size.
// Every pool hands out its best fit (the smallest free block that is big enough). The large
// pool's exact reuse makes the steady state certain for the biggest buffers: a step allocates the
// same shapes every micro-batch and iteration, so each large size ends up with as many
// segments as it ever has live at once, and after the first iteration no request finds its
// size missing. Letting a smaller request split a bigger cached segment (PyTorch's default)
// makes the next request of the bigger size cudaMalloc again, and the cache grows for several
// iterations (SteadyStateMakesNoBackingCalls catches that). Sizes that stop being used stay
// cached until memory runs short: then every fully free segment is released and the backing
// asked once more.
class CachingAllocator {
 public:
  // Every returned pointer is aligned to this: what cuBLASLt and 16-byte vector loads want.
  static constexpr int64_t kAlignment = 256;
  // Every block size is a multiple of this, so every block of a segment starts
  // kAlignment-aligned when the segment does (cudaMalloc aligns to 256 bytes or more).
  static constexpr int64_t kBlockRounding = 512;
  // The largest request of the small pool, and its segment size: 2 MiB is the GPU's large
  // page, the granularity at which cudaMalloc maps memory anyway.
  static constexpr int64_t kSmallRequest = 1 << 20;
  static constexpr int64_t kSmallSegment = 2 << 20;
  // Requests from here on are large; below it, medium requests share 20 MiB segments (two
  // to twenty blocks per cudaMalloc).
  static constexpr int64_t kLargeRequest = 10 << 20;
  static constexpr int64_t kMediumSegment = 20 << 20;
  // Large segments are rounded up to the page size.
  static constexpr int64_t kLargeSegmentRounding = 2 << 20;
  // Requests above this are refused without asking the backing (and keep the rounding
  // arithmetic far from overflow): 64 PiB is more than any device has.
  static constexpr int64_t kMaxRequest = int64_t{1} << 56;

  // `backing` is not owned and must outlive the allocator.
  explicit CachingAllocator(RawDeviceAllocator* backing);
  // Releases every segment to the backing, including blocks still in use: free them first.
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // A kAlignment-aligned block of at least `bytes` bytes (a distinct one even for 0 bytes);
  // not zeroed. ResourceExhausted when the backing has no room even after the cache was
  // released; InvalidArgument for a negative size.
  absl::StatusOr<void*> Allocate(int64_t bytes);
  // Returns a block from Allocate to the cache (nullptr is ignored). InvalidArgument for a
  // pointer this allocator did not hand out, or one already freed.
  absl::Status Free(void* p);
  // Releases every segment with no block in use back to the backing.
  void EmptyCache();

  AllocatorStats stats() const;
  // Restarts the peaks from the current values.
  void ResetPeaks();

  // The block size a request of `bytes` gets (before any unsplit remainder).
  static int64_t RoundedSize(int64_t bytes);
  // The segment the backing is asked for when no cached block fits a `rounded` block; for a
  // large request, also the size of its block.
  static int64_t SegmentSize(int64_t rounded);

 private:
  enum class Pool { kSmall, kMedium, kLarge };
  // A piece of a segment. A segment's blocks form a doubly linked list in address order,
  // so neighbours are found in O(1) when merging.
  struct Block {
    char* ptr;
    int64_t size;
    Pool pool;
    bool allocated = false;
    int64_t requested = 0;  // the caller's size while allocated
    Block* prev = nullptr;
    Block* next = nullptr;
  };
  // Best fit: ordered by size, then address, so lower_bound finds the smallest block that
  // fits (and among equals the lowest address, which keeps reuse deterministic).
  struct BySizeThenAddress {
    bool operator()(const Block* a, const Block* b) const;
  };
  using FreeList = std::set<Block*, BySizeThenAddress>;

  static Pool PoolFor(int64_t rounded);
  FreeList& FreeListOf(Pool pool) { return free_[static_cast<int>(pool)]; }
  // Whether the part of a block beyond a request becomes a free block of its own.
  static bool ShouldSplit(Pool pool, int64_t remainder);
  // The best-fitting cached block for a `rounded` request, taken off its free list; nullptr
  // when none fits.
  Block* TakeCachedBlockLocked(Pool pool, int64_t rounded);
  // A new segment from the backing as one free block (not on a free list).
  absl::StatusOr<Block*> NewSegmentLocked(Pool pool, int64_t rounded, int64_t bytes);
  void ReleaseCachedSegmentsLocked();

  RawDeviceAllocator* const backing_;
  mutable std::mutex mu_;  // the gradient-reduction thread frees too
  FreeList free_[3];       // by Pool
  absl::flat_hash_map<void*, Block*> allocated_;
  AllocatorStats stats_;
};

}  // namespace conveyor

#endif  // CONVEYOR_RUNTIME_CACHING_ALLOCATOR_H_
