// The CPU backend's one pool of worker threads: every op with real work (norms,
// elementwise, cross-entropy, embedding, the optimizer) splits its rows or elements
// over it. It is sized by the CPUs this process may use (its affinity mask, capped by
// its cgroup's CPU quota), not by the machine's core count: a container limited to two
// CPUs on a 64-core host gets two threads, not 64 that take turns. OpenBLAS keeps its
// own threads; SetCpuThreads (gemm.h) sizes both alike.
//
// Each range is computed by one thread exactly as the single-threaded loop computes it,
// so splitting never changes a result when the ranges are rows or independent elements.
#ifndef CONVEYOR_RUNTIME_CPU_THREAD_POOL_H_
#define CONVEYOR_RUNTIME_CPU_THREAD_POOL_H_

#include <cstdint>
#include <string>

#include "absl/functional/function_ref.h"

namespace conveyor::cpu {

// CPUs this process may run on: sched_getaffinity's count, capped by the cgroup v2
// quota (cpu.max "quota period" of the process's group and its ancestors, rounded up).
int UsableCpus();
// The same with the files read under `root` (tests) and `affinity` CPUs allowed.
int UsableCpusUnder(const std::string& root, int affinity);

// Sets the pool's threads (the caller counts as one); 1 runs everything inline. The
// default is UsableCpus(). Not to be called while an op runs.
void SetPoolThreads(int threads);
int PoolThreads();

// Calls fn(begin, end) on disjoint contiguous ranges covering [0, n), on the pool's
// threads, and returns when all are done. Work under 2 * `grain` runs inline as one
// range; more is cut into a few ranges per thread. A call made from inside fn, or while
// another thread's call holds the pool, runs inline.
void ParallelFor(int64_t n, int64_t grain, absl::FunctionRef<void(int64_t, int64_t)> fn);

// Calls fn(i) for each i in [0, n) on the pool's threads, each index a task of its own
// that the next free thread takes, in order; returns when all are done. For a few coarse
// tasks (a GEMM's tiles), where ParallelFor's ranges of several tasks each can leave one
// thread a whole range behind the others at the end. Inline as ParallelFor is.
void ParallelForEach(int64_t n, absl::FunctionRef<void(int64_t)> fn);

}  // namespace conveyor::cpu

#endif  // CONVEYOR_RUNTIME_CPU_THREAD_POOL_H_
