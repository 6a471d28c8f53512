// The GEMM rate of Conveyor's CPU kernels on given shapes: fp32 as the CPU backend runs it
// (runtime/cpu/gemm.h: the AVX-512 kernel where the CPU has it), fp32 through OpenBLAS,
// and bf16 through the AVX-512 BF16 kernel (runtime/cpu/bf16_gemm.h, when the CPU has it),
// for each layout a linear layer uses: forward x w^T (NT), input gradient dy w (NN),
// weight gradient dy^T x (TN). tools/bench_cpu_vs_pytorch.py reads its lines as the
// machine's measured peak.
//
//   gemm_peak [--cold] M,N,K [M,N,K ...]
// prints "gemm_peak <fp32|openblas|bf16> <NT|NN|TN> M N K <GFLOP/s>", the best of 5 runs.
// With --cold, 256 MiB are written before each run, so that the operands come from memory
// as in a training step (where each GEMM's inputs were written long before), not from the
// caches the previous run left them in.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <functional>
#include <random>
#include <string_view>
#include <vector>

#include "runtime/cpu/bf16_gemm.h"
#include "runtime/cpu/gemm.h"

namespace conveyor::cpu {
namespace {

bool cold = false;  // --cold

// Writes more than any CPU's caches hold, evicting the operands.
void EvictCaches() {
  static std::vector<char> bytes(size_t{256} << 20);
  static char value = 0;
  std::fill(bytes.begin(), bytes.end(), ++value);
}

double BestGflops(int64_t m, int64_t n, int64_t k, const std::function<void()>& run) {
  run();  // warm-up: pages, packing buffers, threads
  double best = 0;
  for (int i = 0; i < 5; ++i) {
    if (cold) EvictCaches();
    const auto start = std::chrono::steady_clock::now();
    run();
    const std::chrono::duration<double> s = std::chrono::steady_clock::now() - start;
    best = std::max(best, 2.0 * m * n * k / s.count() / 1e9);
  }
  return best;
}

// The kernels measured, in this order: OpenBLAS last, since its idle threads spin for a
// while after each call and would take a CPU from the pool's threads that the others run on.
enum class Kernel { kFp32, kBf16, kOpenBlas };

void MeasureShape(Kernel kernel, int64_t m, int64_t n, int64_t k) {
  if (kernel == Kernel::kBf16 && !HasBf16Gemm()) return;
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  // Room for every layout's operands: A is [m, k] or [k, m], B [k, n] or [n, k].
  std::vector<float> a(m * k), b(k * n), c(m * n);
  for (float& x : a) x = normal(rng);
  for (float& x : b) x = normal(rng);
  std::vector<BFloat16> a16(a.size()), b16(b.size());
  std::transform(a.begin(), a.end(), a16.begin(), ToBFloat16);
  std::transform(b.begin(), b.end(), b16.begin(), ToBFloat16);
  struct Layout {
    const char* name;
    bool trans_a, trans_b;
  };
  for (const Layout& l :
       {Layout{"NT", false, true}, Layout{"NN", false, false}, Layout{"TN", true, false}}) {
    const int64_t lda = l.trans_a ? m : k, ldb = l.trans_b ? k : n;
    const double gflops = BestGflops(m, n, k, [&] {
      switch (kernel) {
        case Kernel::kFp32:
          Gemm(l.trans_a, l.trans_b, m, n, k, 1.0f, a.data(), b.data(), 0.0f, c.data());
          break;
        case Kernel::kBf16:
          Bf16Gemm(l.trans_a, l.trans_b, m, n, k, 1.0f, a16.data(), lda, b16.data(), ldb, 0.0f,
                   c.data(), n);
          break;
        case Kernel::kOpenBlas:
          GemmStrided(l.trans_a, l.trans_b, m, n, k, 1.0f, a.data(), lda, b.data(), ldb, 0.0f,
                      c.data(), n);
          break;
      }
    });
    const char* name = kernel == Kernel::kFp32   ? "fp32"
                       : kernel == Kernel::kBf16 ? "bf16"
                                                 : "openblas";
    std::printf("gemm_peak %s %s %ld %ld %ld %.1f\n", name, l.name, m, n, k, gflops);
  }
}

}  // namespace
}  // namespace conveyor::cpu

int main(int argc, char** argv) {
  int first = 1;
  if (argc > 1 && std::string_view(argv[1]) == "--cold") {
    conveyor::cpu::cold = true;
    first = 2;
  }
  if (argc <= first) {
    std::fprintf(stderr, "usage: gemm_peak [--cold] M,N,K [M,N,K ...]\n");
    return 2;
  }
  std::vector<std::array<long, 3>> shapes;
  for (int i = first; i < argc; ++i) {
    long m, n, k;
    if (std::sscanf(argv[i], "%ld,%ld,%ld", &m, &n, &k) != 3 || m <= 0 || n <= 0 || k <= 0) {
      std::fprintf(stderr, "gemm_peak: '%s' is not M,N,K (three positive sizes)\n", argv[i]);
      return 2;
    }
    shapes.push_back({m, n, k});
  }
  using conveyor::cpu::Kernel;
  for (const Kernel kernel : {Kernel::kFp32, Kernel::kBf16, Kernel::kOpenBlas}) {
    for (const auto& [m, n, k] : shapes) conveyor::cpu::MeasureShape(kernel, m, n, k);
  }
  return 0;
}
