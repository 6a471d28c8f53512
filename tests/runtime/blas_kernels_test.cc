// The kernels the trainer names for OpenBLAS: the fastest a CPU's features allow, only
// when OpenBLAS fell back to its generic Prescott kernels (a hidden CPU model); a choice
// of its own stands.
#include "runtime/cpu/blas_kernels.h"

#include "gtest/gtest.h"

namespace conveyor::cpu {
namespace {

TEST(BlasKernelsTest, NamesTheFastestKernelsAfterTheGenericFallback) {
  const CpuFeatures sapphire_rapids{true, true, true};
  const CpuFeatures skylake_server{true, true, false};
  const CpuFeatures haswell{true, false, false};
  const CpuFeatures old_cpu;
  EXPECT_EQ(FasterBlasCore("Prescott", sapphire_rapids), "Cooperlake");
  EXPECT_EQ(FasterBlasCore("prescott", skylake_server), "SkylakeX");
  EXPECT_EQ(FasterBlasCore("Prescott", haswell), "Haswell");
  EXPECT_EQ(FasterBlasCore("Prescott", old_cpu), "");
  // OpenBLAS recognised the CPU: its choice stands.
  EXPECT_EQ(FasterBlasCore("Haswell", sapphire_rapids), "");
  EXPECT_EQ(FasterBlasCore("SkylakeX", sapphire_rapids), "");
  EXPECT_EQ(FasterBlasCore("", sapphire_rapids), "");
}

}  // namespace
}  // namespace conveyor::cpu
