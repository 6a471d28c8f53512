// Which of OpenBLAS's kernels the CPU runs. Debian's OpenBLAS is built for every x86 CPU
// (DYNAMIC_ARCH) and picks its kernels from the CPU's model as it loads; a virtual machine
// that hides the model ("Intel(R) Xeon(R) Processor") makes it fall back to its Prescott
// (SSE3) kernels, though the CPU runs AVX-512. On this project's 2-core VM a 2048 x 1024
// x 256 sgemm runs at 62 GFLOP/s with them, 197 with SkylakeX's and 266 with Cooperlake's.
// OPENBLAS_CORETYPE names the kernels instead, read only when the library loads.
#ifndef CONVEYOR_RUNTIME_CPU_BLAS_KERNELS_H_
#define CONVEYOR_RUNTIME_CPU_BLAS_KERNELS_H_

#include <string>

#include "absl/strings/string_view.h"

namespace conveyor::cpu {

// The x86 features OpenBLAS's faster kernels need.
struct CpuFeatures {
  bool avx2_fma = false;
  bool avx512 = false;  // F, CD, BW, DQ and VL, as SkylakeX's kernels use them
  bool avx512_bf16 = false;
};

CpuFeatures ThisCpu();

// The kernels to name for a CPU with `features` when OpenBLAS chose `chosen` on its own:
// the fastest the features allow when `chosen` is its generic fallback (Prescott), else
// empty (its choice stands).
std::string FasterBlasCore(absl::string_view chosen, const CpuFeatures& features);

// The same for this process: empty too when OPENBLAS_CORETYPE is set already.
std::string FasterBlasCoreForThisProcess();

// The kernels OpenBLAS runs in this process, e.g. "Cooperlake".
std::string BlasCoreName();

}  // namespace conveyor::cpu

#endif  // CONVEYOR_RUNTIME_CPU_BLAS_KERNELS_H_
