#include "runtime/cpu/thread_pool.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace conveyor::cpu {
namespace {

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// ceil(quota / period) from a cgroup v2 cpu.max ("200000 100000"; "max 100000" or no
// file: no limit).
int CpuMaxLimit(const std::string& path, int no_limit) {
  const std::vector<std::string> fields =
      absl::StrSplit(absl::StripAsciiWhitespace(ReadText(path)), ' ', absl::SkipEmpty());
  int64_t quota = 0, period = 0;
  if (fields.size() != 2 || !absl::SimpleAtoi(fields[0], &quota) ||
      !absl::SimpleAtoi(fields[1], &period) || quota <= 0 || period <= 0) {
    return no_limit;
  }
  return static_cast<int>(std::max<int64_t>(1, (quota + period - 1) / period));
}

thread_local bool in_pool_thread = false;

// Run() cuts the job into chunks (a few per thread) that the caller and the workers take
// from one ticket, so a worker that wakes late (the machine busy with other work, or
// OpenBLAS's threads still spinning) costs nothing: the others take its chunks, and the
// caller waits only for chunks taken. The ticket packs the job's generation with its
// chunk count and next chunk; a worker takes a chunk by compare-and-swap on it, so one
// that still holds an old generation takes nothing from the next job.
class Pool {
 public:
  explicit Pool(int threads) {
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { Work(); });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    start_.notify_all();
    for (std::thread& w : workers_) w.join();
  }
  int threads() const { return static_cast<int>(workers_.size()) + 1; }

  // fn over [0, n) in `chunks` ranges (0: a few per thread), taken in order by the caller
  // and the workers.
  void Run(int64_t n, int64_t grain, uint64_t chunks,
           absl::FunctionRef<void(int64_t, int64_t)> fn) {
    const int64_t parts = std::clamp<int64_t>(n / std::max<int64_t>(grain, 1), 1, threads());
    std::unique_lock<std::mutex> busy(busy_, std::try_to_lock);
    if (parts == 1 || in_pool_thread || !busy.owns_lock()) {
      fn(0, n);
      return;
    }
    if (chunks == 0) chunks = static_cast<uint64_t>(parts) * kChunksPerThread;
    chunks = std::min(chunks, kField);
    uint64_t generation;
    {
      std::lock_guard<std::mutex> lock(mu_);
      job_ = &fn;
      n_ = n;
      per_ = (n + chunks - 1) / chunks;
      chunks_ = chunks;
      completed_.store(0, std::memory_order_relaxed);
      generation = ++generation_ & kGenerationMask;
      ticket_.store(generation << 40 | chunks << 20, std::memory_order_release);
    }
    start_.notify_all();
    RunChunks(generation);
    std::unique_lock<std::mutex> lock(mu_);
    done_.wait(lock, [&] { return completed_.load() == chunks; });
  }

 private:
  static constexpr int64_t kChunksPerThread = 4;
  static constexpr uint64_t kGenerationMask = (uint64_t{1} << 24) - 1;
  static constexpr uint64_t kField = (uint64_t{1} << 20) - 1;

  // Takes and runs chunks of job `generation` until none is left.
  void RunChunks(uint64_t generation) {
    uint64_t ticket = ticket_.load(std::memory_order_acquire);
    while (ticket >> 40 == generation && (ticket & kField) < ((ticket >> 20) & kField)) {
      if (!ticket_.compare_exchange_weak(ticket, ticket + 1, std::memory_order_acquire)) continue;
      // The chunk is ours, so the job cannot end before it does: its fields hold.
      const uint64_t chunks = chunks_;
      const int64_t begin = std::min(n_, static_cast<int64_t>(ticket & kField) * per_);
      const int64_t end = std::min(n_, begin + per_);
      if (begin < end) (*job_)(begin, end);
      // The last chunk done: from here on the job's fields may be the next job's.
      if (completed_.fetch_add(1) + 1 == chunks) {
        std::lock_guard<std::mutex> lock(mu_);
        done_.notify_one();
      }
      ticket = ticket_.load(std::memory_order_acquire);
    }
  }

  void Work() {
    in_pool_thread = true;
    uint64_t seen = 0;
    while (true) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        start_.wait(lock, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
      }
      RunChunks(seen & kGenerationMask);
    }
  }

  std::mutex busy_;  // held by the one caller whose job the workers run
  std::mutex mu_;
  std::condition_variable start_, done_;
  bool stop_ = false;
  uint64_t generation_ = 0;
  std::atomic<uint64_t> ticket_{0};  // generation << 40 | chunks << 20 | next chunk
  std::atomic<uint64_t> completed_{0};
  const absl::FunctionRef<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t n_ = 0, per_ = 0;
  uint64_t chunks_ = 0;
  std::vector<std::thread> workers_;
};

// The pool and its lock. After fork() the child has only the forking thread: the
// parent's workers are gone, and the pool's mutexes and condition variables are copies
// that may be held, or count sleeping waiters, that no thread will ever release or wake
// (waking them waits forever). So the child never touches the parent's pool, not even to
// destroy it: it forgets it (leaked) and starts a pool of its own, with the same number
// of threads, at its first use (ForgetPoolAfterFork, registered with pthread_atfork).
std::mutex* pool_mu = new std::mutex;
Pool* pool = nullptr;
int pool_threads = 0;  // 0: UsableCpus()

void ForgetPoolAfterFork() {
  pool = nullptr;
  pool_mu = new std::mutex;
}

// The current process's pool, made at first use; the caller holds *pool_mu.
Pool& PoolLocked() {
  static const bool registered = pthread_atfork(nullptr, nullptr, &ForgetPoolAfterFork) == 0;
  (void)registered;
  if (pool == nullptr) pool = new Pool(pool_threads > 0 ? pool_threads : UsableCpus());
  return *pool;
}

Pool& CurrentPool() {
  std::lock_guard<std::mutex> lock(*pool_mu);
  return PoolLocked();
}

}  // namespace

int UsableCpusUnder(const std::string& root, int affinity) {
  int cpus = std::max(1, affinity);
  // /proc/self/cgroup's v2 line is "0::/group"; the quota of any ancestor binds too.
  for (absl::string_view line : absl::StrSplit(ReadText(root + "/proc/self/cgroup"), '\n')) {
    if (!absl::ConsumePrefix(&line, "0::")) continue;
    std::string group(absl::StripSuffix(line, "/"));
    while (true) {
      cpus = std::min(cpus, CpuMaxLimit(root + "/sys/fs/cgroup" + group + "/cpu.max", cpus));
      if (group.empty()) break;
      group = group.substr(0, group.rfind('/'));
    }
  }
  return cpus;
}

int UsableCpus() {
  cpu_set_t set;
  const int affinity = sched_getaffinity(0, sizeof(set), &set) == 0
                           ? CPU_COUNT(&set)
                           : static_cast<int>(std::thread::hardware_concurrency());
  return UsableCpusUnder("", affinity);
}

void SetPoolThreads(int threads) {
  std::lock_guard<std::mutex> lock(*pool_mu);
  pool_threads = std::max(1, threads);
  if (PoolLocked().threads() == pool_threads) return;
  delete pool;
  pool = new Pool(pool_threads);
}

int PoolThreads() {
  std::lock_guard<std::mutex> lock(*pool_mu);
  return PoolLocked().threads();
}

void ParallelFor(int64_t n, int64_t grain, absl::FunctionRef<void(int64_t, int64_t)> fn) {
  if (n <= 0) return;
  CurrentPool().Run(n, grain, /*chunks=*/0, fn);
}

void ParallelForEach(int64_t n, absl::FunctionRef<void(int64_t)> fn) {
  if (n <= 0) return;
  CurrentPool().Run(n, /*grain=*/1, static_cast<uint64_t>(n), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) fn(i);
  });
}

}  // namespace conveyor::cpu
