// Conveyor's trainer executable. Everything happens in RunCli (trainer/cli.h).
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "runtime/cpu/blas_kernels.h"
#include "runtime/device_memory.h"
#include "trainer/cli.h"
#include "trainer/reporting/stdout_stream.h"

int main(int argc, char** argv) {
  // A closed stdout (`trainer ... | head`) or a file at its size limit must not kill the
  // run without a word (trainer/reporting/stdout_stream.h).
  conveyor::SurviveFailedWrites();
  // OpenBLAS reads OPENBLAS_CORETYPE only as it loads, so naming faster kernels than the
  // generic ones it fell back to takes a fresh start of this program, with the same
  // arguments (runtime/cpu/blas_kernels.h); the ranks it forks inherit the choice.
  if (const std::string core = conveyor::cpu::FasterBlasCoreForThisProcess(); !core.empty()) {
    setenv("OPENBLAS_CORETYPE", core.c_str(), /*overwrite=*/1);
    execv("/proc/self/exe", argv);  // returns only when it fails: go on with these kernels
  }
  // Buffers come unfilled in a run, as on the GPU; the tests keep the NaN fill
  // (runtime/device_memory.h), and so does a run that asks for it.
  const char* poison = std::getenv("CONVEYOR_POISON_HOST_MEMORY");
  conveyor::SetHostMemoryPoison(poison != nullptr && std::string(poison) == "1");
  const std::vector<std::string> args(argv + 1, argv + argc);
  const int code = conveyor::RunCli(args, std::cout, std::cerr);
  std::cout.flush();
  return code;
}
