// The CPU attention's time for one layer, forward and backward, on a given shape:
//
//   attention_bench [BATCH SEQ HEADS HEAD_DIM [ROUNDS [THREADS]]]
//
// (default 8 256 4 64 15 and the thread pool's default threads: tools/bench_cpu.sh's
// model, causal, one key/value head per query head) prints
// "attention_bench forward|backward <best ms> <median ms> <best thread ms>" over the
// rounds, after one warm-up round; the last is the calling thread's CPU time, all of the
// work when THREADS is 1, which other processes on the CPUs inflate less than wall time.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "runtime/cpu/attention.h"
#include "runtime/cpu/gemm.h"

namespace conveyor::cpu {
namespace {

double ThreadCpuMs() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

template <typename Fn>
void Report(const char* name, int rounds, Fn run) {
  run();  // warm-up: pages, threads
  std::vector<double> ms;
  double best_cpu = 1e300;
  for (int i = 0; i < rounds; ++i) {
    const double cpu = ThreadCpuMs();
    const auto start = std::chrono::steady_clock::now();
    run();
    const std::chrono::duration<double, std::milli> t = std::chrono::steady_clock::now() - start;
    best_cpu = std::min(best_cpu, ThreadCpuMs() - cpu);
    ms.push_back(t.count());
  }
  std::sort(ms.begin(), ms.end());
  std::printf("attention_bench %s %.2f %.2f %.2f\n", name, ms.front(), ms[ms.size() / 2], best_cpu);
}

void Run(const AttentionShape& s, int rounds) {
  std::mt19937 gen(1);
  std::normal_distribution<float> normal;
  std::vector<float> qkv(s.batch * s.seq * s.qkv_width()),
      dctx(s.batch * s.seq * s.context_width());
  for (float& x : qkv) x = normal(gen);
  for (float& x : dctx) x = normal(gen);
  std::vector<float> ctx(dctx.size()), lse(s.batch * s.heads() * s.seq), dqkv(qkv.size());
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
  const AttentionMask mask;  // causal
  const AttentionDropout dropout;
  Report("forward", rounds,
         [&] { AttentionForward(s, mask, qkv.data(), scale, dropout, lse.data(), ctx.data()); });
  Report("backward", rounds, [&] {
    AttentionBackward(s, mask, qkv.data(), lse.data(), ctx.data(), dctx.data(), scale, dropout,
                      dqkv.data());
  });
}

}  // namespace
}  // namespace conveyor::cpu

int main(int argc, char** argv) {
  long v[6] = {8, 256, 4, 64, 15, 0};
  if (argc != 1 && (argc < 5 || argc > 7)) {
    std::fprintf(stderr, "usage: attention_bench [BATCH SEQ HEADS HEAD_DIM [ROUNDS [THREADS]]]\n");
    return 2;
  }
  for (int i = 1; i < argc; ++i) {
    v[i - 1] = std::strtol(argv[i], nullptr, 10);
    if (v[i - 1] <= 0) {
      std::fprintf(stderr, "attention_bench: argument %d ('%s') must be a positive integer\n", i,
                   argv[i]);
      return 2;
    }
  }
  if (v[5] > 0) conveyor::cpu::SetCpuThreads(static_cast<int>(v[5]));
  const conveyor::AttentionShape shape{v[0], v[1], /*groups=*/v[2], /*heads_per_group=*/1, v[3]};
  conveyor::cpu::Run(shape, static_cast<int>(v[4]));
  return 0;
}
