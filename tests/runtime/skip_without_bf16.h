// The start of every test of the AVX-512 BF16 kernels: on a CPU without them it skips
// the test, saying so, and the test passes (--bf16 on such a CPU runs the emulation).
// A macro because GTEST_SKIP returns from the function it is written in.
#ifndef CONVEYOR_TESTS_RUNTIME_SKIP_WITHOUT_BF16_H_
#define CONVEYOR_TESTS_RUNTIME_SKIP_WITHOUT_BF16_H_

#include "gtest/gtest.h"
#include "runtime/cpu/bf16_gemm.h"

#define SKIP_WITHOUT_BF16()                                                                  \
  do {                                                                                       \
    if (!::conveyor::cpu::HasBf16Gemm()) {                                                   \
      GTEST_SKIP() << "this CPU has no AVX-512 BF16 (no avx512_bf16 in /proc/cpuinfo), "     \
                      "so the bf16 GEMM cannot run here; run on such a CPU (Intel Cooper "   \
                      "Lake or Sapphire Rapids and later, AMD Zen 4 and later) to check it"; \
    }                                                                                        \
  } while (0)

#endif  // CONVEYOR_TESTS_RUNTIME_SKIP_WITHOUT_BF16_H_
