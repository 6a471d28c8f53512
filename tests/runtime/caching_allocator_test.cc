// The caching allocator's policy, on the CPU: a fake backing hands out fake addresses
// (the allocator never touches the memory) and counts its calls, which stand for cudaMalloc
// and cudaFree.
#include "runtime/caching_allocator.h"

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace conveyor {
namespace {

constexpr int64_t kKiB = 1 << 10;
constexpr int64_t kMiB = 1 << 20;

// Segments back to back from a fake address space, so blocks of two segments can be
// adjacent in address: merging must still never cross a segment boundary.
class FakeBacking : public RawDeviceAllocator {
 public:
  explicit FakeBacking(int64_t capacity = int64_t{1} << 50, uintptr_t misalign = 0)
      : capacity_(capacity), next_((uintptr_t{1} << 40) + misalign) {}
  ~FakeBacking() override { EXPECT_TRUE(segments_.empty()) << "segments leaked"; }

  void* Allocate(int64_t bytes) override {
    ++allocate_calls;
    if (live_bytes + bytes > capacity_) return nullptr;
    const uintptr_t p = next_;
    next_ += static_cast<uintptr_t>(bytes);
    segments_[p] = bytes;
    live_bytes += bytes;
    return reinterpret_cast<void*>(p);
  }
  void Release(void* p, int64_t bytes) override {
    ++release_calls;
    auto it = segments_.find(reinterpret_cast<uintptr_t>(p));
    ASSERT_NE(it, segments_.end()) << "released a pointer that is not a segment";
    EXPECT_EQ(it->second, bytes) << "released with a size other than the segment's";
    live_bytes -= it->second;
    segments_.erase(it);
  }

  int allocate_calls = 0;
  int release_calls = 0;
  int64_t live_bytes = 0;

 private:
  int64_t capacity_;
  uintptr_t next_;
  std::map<uintptr_t, int64_t> segments_;
};

uintptr_t Addr(void* p) { return reinterpret_cast<uintptr_t>(p); }

void* MustAllocate(CachingAllocator& a, int64_t bytes) {
  absl::StatusOr<void*> p = a.Allocate(bytes);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : nullptr;
}

void MustFree(CachingAllocator& a, void* p) {
  const absl::Status s = a.Free(p);
  EXPECT_TRUE(s.ok()) << s;
}

TEST(CachingAllocatorTest, RoundsAndSizesSegments) {
  EXPECT_EQ(CachingAllocator::RoundedSize(0), 512);
  EXPECT_EQ(CachingAllocator::RoundedSize(1), 512);
  EXPECT_EQ(CachingAllocator::RoundedSize(512), 512);
  EXPECT_EQ(CachingAllocator::RoundedSize(513), 1024);
  EXPECT_EQ(CachingAllocator::SegmentSize(512), 2 * kMiB);
  EXPECT_EQ(CachingAllocator::SegmentSize(kMiB), 2 * kMiB);
  EXPECT_EQ(CachingAllocator::SegmentSize(kMiB + 512), 20 * kMiB);
  EXPECT_EQ(CachingAllocator::SegmentSize(10 * kMiB - 512), 20 * kMiB);
  EXPECT_EQ(CachingAllocator::SegmentSize(10 * kMiB), 10 * kMiB);
  EXPECT_EQ(CachingAllocator::SegmentSize(11 * kMiB), 12 * kMiB);
}

TEST(CachingAllocatorTest, ReusesAFreedBlockWithoutABackingCall) {
  FakeBacking backing;
  CachingAllocator a(&backing);
  void* p = MustAllocate(a, 4000);
  MustFree(a, p);
  void* q = MustAllocate(a, 4000);
  EXPECT_EQ(q, p);
  void* big = MustAllocate(a, 64 * kMiB);
  MustFree(a, big);
  EXPECT_EQ(MustAllocate(a, 64 * kMiB), big);
  EXPECT_EQ(backing.allocate_calls, 2);
  EXPECT_EQ(a.stats().num_backing_allocations, 2);
  MustFree(a, q);
  MustFree(a, big);
}

TEST(CachingAllocatorTest, SplitsASegmentIntoAdjacentBlocks) {
  FakeBacking backing;
  CachingAllocator a(&backing);
  void* p = MustAllocate(a, 1000);  // 1024-byte block at the start of a 2 MiB segment
  void* q = MustAllocate(a, 100);   // 512 bytes right after it
  void* r = MustAllocate(a, 3000);  // 3072 bytes after that
  EXPECT_EQ(Addr(q), Addr(p) + 1024);
  EXPECT_EQ(Addr(r), Addr(q) + 512);
  EXPECT_EQ(backing.allocate_calls, 1);
  EXPECT_EQ(a.stats().bytes_in_use, 1024 + 512 + 3072);
  for (void* x : {p, q, r}) MustFree(a, x);
}

TEST(CachingAllocatorTest, MergesFreeNeighboursIntoOneBlock) {
  FakeBacking backing;
  CachingAllocator a(&backing);
  void* p = MustAllocate(a, 1024);
  void* q = MustAllocate(a, 1024);
  void* r = MustAllocate(a, 1024);
  void* guard = MustAllocate(a, 512);
  // Free the outer ones, then the middle: it merges with both sides.
  MustFree(a, p);
  MustFree(a, r);
  MustFree(a, q);
  // The merged 3 KiB hole is the best fit for 3 KiB (the segment's tail is bigger).
  void* merged = MustAllocate(a, 3 * kKiB);
  EXPECT_EQ(merged, p);
  MustFree(a, merged);
  MustFree(a, guard);
  // Everything free: the segment is one block again, handed out whole.
  void* whole = MustAllocate(a, kMiB);
  EXPECT_EQ(whole, p);
  EXPECT_EQ(backing.allocate_calls, 1);
  MustFree(a, whole);
  a.EmptyCache();
  EXPECT_EQ(backing.release_calls, 1);
  EXPECT_EQ(a.stats().bytes_reserved, 0);
}

TEST(CachingAllocatorTest, NeverMergesAcrossSegments) {
  FakeBacking backing;  // hands out the two segments back to back in address
  CachingAllocator a(&backing);
  std::vector<void*> blocks;
  for (int i = 0; i < 4; ++i) blocks.push_back(MustAllocate(a, kMiB));  // two full segments
  EXPECT_EQ(backing.allocate_calls, 2);
  EXPECT_EQ(Addr(blocks[2]), Addr(blocks[0]) + 2 * kMiB);  // adjacent segments
  for (void* p : blocks) MustFree(a, p);
  a.EmptyCache();  // FakeBacking checks each release has its segment's exact size
  EXPECT_EQ(backing.release_calls, 2);
}

TEST(CachingAllocatorTest, PicksTheSmallestBlockThatFits) {
  FakeBacking backing;
  CachingAllocator a(&backing);
  // Holes of 4 KiB, 2 KiB and 8 KiB, kept apart by blocks in use.
  void* h4 = MustAllocate(a, 4 * kKiB);
  void* g1 = MustAllocate(a, 512);
  void* h2 = MustAllocate(a, 2 * kKiB);
  void* g2 = MustAllocate(a, 512);
  void* h8 = MustAllocate(a, 8 * kKiB);
  void* g3 = MustAllocate(a, 512);
  for (void* h : {h4, h2, h8}) MustFree(a, h);

  std::vector<void*> got;
  got.push_back(MustAllocate(a, 1500));      // 1536 fits the 2 KiB hole best
  got.push_back(MustAllocate(a, 3000));      // 3072: the 4 KiB hole
  got.push_back(MustAllocate(a, 5 * kKiB));  // the 8 KiB hole, not the segment's big tail
  // The split-off remainders are holes too: 512 after h2, 1 KiB after h4, 3 KiB after h8.
  got.push_back(MustAllocate(a, 512));
  got.push_back(MustAllocate(a, 1024));
  EXPECT_EQ(got[0], h2);
  EXPECT_EQ(got[1], h4);
  EXPECT_EQ(got[2], h8);
  EXPECT_EQ(Addr(got[3]), Addr(h2) + 1536);
  EXPECT_EQ(Addr(got[4]), Addr(h4) + 3072);
  EXPECT_EQ(backing.allocate_calls, 1);
  EXPECT_EQ(a.stats().blocks_in_use, 8);
  for (void* p : got) MustFree(a, p);
  for (void* g : {g1, g2, g3}) MustFree(a, g);
}

TEST(CachingAllocatorTest, MediumPoolKeepsSmallRemaindersInTheBlock) {
  FakeBacking backing;
  CachingAllocator a(&backing);
  void* p = MustAllocate(a, 8 * kMiB);  // from a 20 MiB segment
  void* q = MustAllocate(a, 8 * kMiB);
  // 3.5 MiB leaves 0.5 MiB: only small requests could use it, and they have their own pool,
  // so the block keeps it.
  void* r = MustAllocate(a, 3 * kMiB + 512 * kKiB);
  EXPECT_EQ(Addr(q), Addr(p) + 8 * kMiB);
  EXPECT_EQ(Addr(r), Addr(q) + 8 * kMiB);
  EXPECT_EQ(backing.allocate_calls, 1);
  EXPECT_EQ(a.stats().bytes_in_use, 20 * kMiB);
  EXPECT_EQ(a.stats().bytes_requested, 19 * kMiB + 512 * kKiB);
  MustFree(a, p);
  // Likewise 7.5 MiB from the 8 MiB hole takes all of it.
  void* s = MustAllocate(a, 7 * kMiB + 512 * kKiB);
  EXPECT_EQ(s, p);
  EXPECT_EQ(a.stats().bytes_in_use, 20 * kMiB);
  for (void* x : {q, r, s}) MustFree(a, x);
}

TEST(CachingAllocatorTest, LargeBlocksAreReusedOnlyBySameSizedRequests) {
  FakeBacking backing;
  CachingAllocator a(&backing);
  void* p = MustAllocate(a, 12 * kMiB);
  void* big = MustAllocate(a, 30 * kMiB);
  MustFree(a, p);
  MustFree(a, big);
  void* q = MustAllocate(a, 11 * kMiB + 1);  // rounds to the same 12 MiB segment
  EXPECT_EQ(q, p);
  EXPECT_EQ(a.stats().bytes_in_use, 12 * kMiB);
  // Not carved out of the cached 30 MiB block: a later 30 MiB request will want it whole.
  void* r = MustAllocate(a, 12 * kMiB);
  EXPECT_NE(r, big);
  EXPECT_EQ(backing.allocate_calls, 3);
  EXPECT_EQ(MustAllocate(a, 30 * kMiB), big);
  EXPECT_EQ(backing.allocate_calls, 3);
  for (void* x : {q, r, big}) MustFree(a, x);
}

TEST(CachingAllocatorTest, SmallAndLargeRequestsUseSeparatePools) {
  FakeBacking backing;
  CachingAllocator a(&backing);
  void* big = MustAllocate(a, 4 * kMiB);
  MustFree(a, big);
  void* small = MustAllocate(a, 4 * kKiB);  // not carved from the cached 20 MiB segment
  EXPECT_EQ(backing.allocate_calls, 2);
  EXPECT_EQ(a.stats().bytes_reserved, 22 * kMiB);
  MustFree(a, small);
}

TEST(CachingAllocatorTest, EveryPointerIsAligned) {
  FakeBacking backing;
  CachingAllocator a(&backing);
  std::mt19937 rng(7);
  std::uniform_int_distribution<int64_t> size(0, 3 * kMiB);
  std::vector<std::pair<uintptr_t, int64_t>> live;
  for (int i = 0; i < 2000; ++i) {
    if (!live.empty() && rng() % 3 == 0) {
      const size_t k = rng() % live.size();
      MustFree(a, reinterpret_cast<void*>(live[k].first));
      live.erase(live.begin() + k);
      continue;
    }
    const int64_t n = i % 10 == 0 ? 1 + static_cast<int64_t>(rng() % 100) : size(rng);
    void* p = MustAllocate(a, n);
    ASSERT_EQ(Addr(p) % CachingAllocator::kAlignment, 0u) << n << " bytes";
    for (const auto& [q, m] : live) {  // and no two live blocks overlap
      ASSERT_TRUE(Addr(p) + n <= q || q + m <= Addr(p)) << "overlap";
    }
    live.push_back({Addr(p), n});
  }
  for (const auto& [q, m] : live) MustFree(a, reinterpret_cast<void*>(q));
  EXPECT_EQ(a.stats().bytes_in_use, 0);
}

TEST(CachingAllocatorTest, ZeroBytesGetsDistinctBlocks) {
  FakeBacking backing;
  CachingAllocator a(&backing);
  void* p = MustAllocate(a, 0);
  void* q = MustAllocate(a, 0);
  EXPECT_NE(p, nullptr);
  EXPECT_NE(p, q);
  MustFree(a, p);
  MustFree(a, q);
}

TEST(CachingAllocatorTest, OutOfMemoryReleasesTheCacheAndRetriesOnce) {
  FakeBacking backing(/*capacity=*/20 * kMiB);
  CachingAllocator a(&backing);
  MustFree(a, MustAllocate(a, 4 * kKiB));  // a cached 2 MiB small segment
  void* big = MustAllocate(a, 3 * kMiB);   // needs 20 MiB: fails, releases the cache, succeeds
  EXPECT_NE(big, nullptr);
  EXPECT_EQ(backing.allocate_calls, 3);
  EXPECT_EQ(backing.release_calls, 1);
  AllocatorStats s = a.stats();
  EXPECT_EQ(s.num_backing_failures, 1);
  EXPECT_EQ(s.num_backing_allocations, 2);
  EXPECT_EQ(s.bytes_reserved, 20 * kMiB);
  EXPECT_EQ(s.segments, 1);
  MustFree(a, big);
}

TEST(CachingAllocatorTest, OutOfMemoryKeepsSegmentsInUseAndReportsTheRequest) {
  FakeBacking backing(/*capacity=*/40 * kMiB);
  CachingAllocator a(&backing);
  void* held = MustAllocate(a, 4 * kKiB);           // its 2 MiB segment stays: a block is in use
  MustFree(a, MustAllocate(a, 3 * kMiB));           // a cached 20 MiB segment
  absl::StatusOr<void*> p = a.Allocate(39 * kMiB);  // a 40 MiB segment: 22 + 40 > 40, then
  ASSERT_FALSE(p.ok());                             // without the cache 2 + 40 > 40 still
  EXPECT_EQ(p.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(p.status().message().find(std::to_string(39 * kMiB) + " bytes"), std::string::npos)
      << p.status();
  AllocatorStats s = a.stats();
  EXPECT_EQ(s.num_backing_failures, 2);
  EXPECT_EQ(s.num_backing_releases, 1);
  EXPECT_EQ(s.bytes_reserved, 2 * kMiB);
  EXPECT_EQ(s.bytes_in_use, 4 * kKiB);
  // The allocator still works after a failure.
  MustFree(a, held);
  EXPECT_EQ(MustAllocate(a, 4 * kKiB), held);
  MustFree(a, held);
}

TEST(CachingAllocatorTest, StatsAreExact) {
  FakeBacking backing;
  CachingAllocator a(&backing);
  void* p = MustAllocate(a, 100);
  AllocatorStats s = a.stats();
  EXPECT_EQ(s.bytes_in_use, 512);
  EXPECT_EQ(s.bytes_requested, 100);
  EXPECT_EQ(s.bytes_reserved, 2 * kMiB);
  EXPECT_EQ(s.segments, 1);
  EXPECT_EQ(s.blocks_in_use, 1);

  void* q = MustAllocate(a, 3 * kMiB);
  s = a.stats();
  EXPECT_EQ(s.bytes_in_use, 512 + 3 * kMiB);
  EXPECT_EQ(s.bytes_reserved, 22 * kMiB);
  EXPECT_EQ(s.peak_bytes_in_use, 512 + 3 * kMiB);

  MustFree(a, q);
  MustFree(a, p);
  s = a.stats();
  EXPECT_EQ(s.bytes_in_use, 0);
  EXPECT_EQ(s.bytes_requested, 0);
  EXPECT_EQ(s.blocks_in_use, 0);
  EXPECT_EQ(s.bytes_reserved, 22 * kMiB);  // cached, not released
  EXPECT_EQ(s.peak_bytes_in_use, 512 + 3 * kMiB);
  EXPECT_EQ(s.num_allocations, 2);

  a.EmptyCache();
  s = a.stats();
  EXPECT_EQ(s.bytes_reserved, 0);
  EXPECT_EQ(s.segments, 0);
  EXPECT_EQ(s.peak_bytes_reserved, 22 * kMiB);
  EXPECT_EQ(s.num_backing_allocations, 2);
  EXPECT_EQ(s.num_backing_releases, 2);
  EXPECT_EQ(backing.live_bytes, 0);

  a.ResetPeaks();
  s = a.stats();
  EXPECT_EQ(s.peak_bytes_in_use, 0);
  EXPECT_EQ(s.peak_bytes_reserved, 0);
}

// One "training step": weights live throughout; per micro-batch, activations are stashed
// in forward and freed in backward (LIFO), with short-lived temporaries in between.
void Step(CachingAllocator& a) {
  std::vector<void*> stash;
  for (int micro_batch = 0; micro_batch < 4; ++micro_batch) {
    for (int layer = 0; layer < 6; ++layer) {
      stash.push_back(MustAllocate(a, 3 * kMiB + 4096));  // attention output
      stash.push_back(MustAllocate(a, 12 * kMiB));        // MLP hidden
      void* tmp = MustAllocate(a, 40 * kKiB + 12);        // norm statistics
      stash.push_back(MustAllocate(a, 2000));
      MustFree(a, tmp);
    }
  }
  while (!stash.empty()) {
    void* grad = MustAllocate(a, 12 * kMiB);
    MustFree(a, stash.back());
    stash.pop_back();
    MustFree(a, grad);
  }
}

TEST(CachingAllocatorTest, SteadyStateMakesNoBackingCalls) {
  FakeBacking backing;
  CachingAllocator a(&backing);
  void* weights = MustAllocate(a, 50 * kMiB);
  Step(a);
  const AllocatorStats warm = a.stats();
  EXPECT_GT(warm.num_backing_allocations, 1);
  for (int step = 0; step < 5; ++step) Step(a);
  const AllocatorStats s = a.stats();
  EXPECT_EQ(s.num_backing_allocations, warm.num_backing_allocations);
  EXPECT_EQ(s.num_backing_releases, 0);
  EXPECT_EQ(s.bytes_reserved, warm.bytes_reserved);
  EXPECT_EQ(s.peak_bytes_in_use, warm.peak_bytes_in_use);
  EXPECT_EQ(s.bytes_in_use, 50 * kMiB);
  MustFree(a, weights);
}

TEST(CachingAllocatorTest, BadFreesAreErrors) {
  FakeBacking backing;
  CachingAllocator a(&backing);
  void* p = MustAllocate(a, 4096);
  EXPECT_EQ(a.Free(static_cast<char*>(p) + 512).code(), absl::StatusCode::kInvalidArgument);
  MustFree(a, p);
  EXPECT_EQ(a.Free(p).code(), absl::StatusCode::kInvalidArgument);  // freed twice
  EXPECT_TRUE(a.Free(nullptr).ok());
}

TEST(CachingAllocatorTest, RejectsImpossibleSizesWithoutAskingTheBacking) {
  FakeBacking backing;
  CachingAllocator a(&backing);
  EXPECT_EQ(a.Allocate(-1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(a.Allocate(int64_t{1} << 62).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(backing.allocate_calls, 0);
}

TEST(CachingAllocatorTest, RefusesAMisalignedBacking) {
  FakeBacking backing(int64_t{1} << 50, /*misalign=*/128);
  CachingAllocator a(&backing);
  EXPECT_EQ(a.Allocate(100).status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(backing.release_calls, 1);
  EXPECT_EQ(a.stats().bytes_reserved, 0);
}

TEST(CachingAllocatorTest, ReleasesEverySegmentWhenDestroyed) {
  FakeBacking backing;
  {
    CachingAllocator a(&backing);
    MustAllocate(a, 100);
    MustAllocate(a, 3 * kMiB);
    MustFree(a, MustAllocate(a, 30 * kMiB));
  }
  EXPECT_EQ(backing.release_calls, 3);
  EXPECT_EQ(backing.live_bytes, 0);
}

TEST(CachingAllocatorTest, ThreadsMayAllocateAndFreeConcurrently) {
  FakeBacking backing;
  CachingAllocator a(&backing);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&a, t] {
      std::mt19937 rng(t);
      std::vector<void*> mine;
      for (int i = 0; i < 2000; ++i) {
        if (!mine.empty() && rng() % 2 == 0) {
          MustFree(a, mine.back());
          mine.pop_back();
        } else {
          mine.push_back(MustAllocate(a, 1 + static_cast<int64_t>(rng() % (2 * kMiB))));
        }
      }
      for (void* p : mine) MustFree(a, p);
    });
  }
  for (std::thread& t : threads) t.join();
  const AllocatorStats s = a.stats();
  EXPECT_EQ(s.bytes_in_use, 0);
  EXPECT_EQ(s.blocks_in_use, 0);
  a.EmptyCache();
  EXPECT_EQ(a.stats().segments, 0);
  EXPECT_EQ(backing.live_bytes, 0);
}

}  // namespace
}  // namespace conveyor
