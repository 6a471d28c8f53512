#include "runtime/cpu/blas_kernels.h"

#include <cblas.h>

#include <cstdlib>

#include "absl/strings/match.h"

namespace conveyor::cpu {

CpuFeatures ThisCpu() {
  CpuFeatures f;
  f.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  f.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512vl");
  f.avx512_bf16 = f.avx512 && __builtin_cpu_supports("avx512bf16");
  return f;
}

std::string FasterBlasCore(absl::string_view chosen, const CpuFeatures& features) {
  if (!absl::EqualsIgnoreCase(chosen, "Prescott")) return "";
  if (features.avx512_bf16) return "Cooperlake";
  if (features.avx512) return "SkylakeX";
  if (features.avx2_fma) return "Haswell";
  return "";
}

std::string FasterBlasCoreForThisProcess() {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return "";
  return FasterBlasCore(BlasCoreName(), ThisCpu());
}

std::string BlasCoreName() { return openblas_get_corename(); }

}  // namespace conveyor::cpu
