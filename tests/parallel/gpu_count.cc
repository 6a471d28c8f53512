#include "tests/parallel/gpu_count.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "cuda_runtime.h"
#include "tests/parallel/multi_rank.h"

namespace conveyor {
namespace testing_util {

int CountGpusInChild(std::string* why) {
  const std::string dir = MakeTestDir("gpu_probe");
  const pid_t pid = ::fork();
  if (pid == 0) {
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    WriteFile(dir + "/why", e == cudaSuccess
                                ? "no CUDA device"
                                : absl::StrCat(cudaGetErrorName(e), ": ", cudaGetErrorString(e)));
    ::_exit(e == cudaSuccess ? std::min(count, 100) : 0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  *why = ReadFile(dir + "/why");
  return WIFEXITED(status) ? WEXITSTATUS(status) : 0;
}

}  // namespace testing_util
}  // namespace conveyor
