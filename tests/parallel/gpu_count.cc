#include "tests/parallel/gpu_count.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include "runtime/cuda/device.h"
#include "tests/parallel/multi_rank.h"
#include "tests/util/test_dirs.h"

namespace conveyor {
namespace testing_util {

int CountGpusInChild(std::string* why) {
  const std::string dir = FreshDir("gpu_probe");
  const pid_t pid = ::fork();
  if (pid == 0) {
    const GpuInfo gpus = ProbeGpus();
    WriteFile(dir + "/why", gpus.error);
    ::_exit(std::min(gpus.count, 100));
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  *why = ReadFile(dir + "/why");
  return WIFEXITED(status) ? WEXITSTATUS(status) : 0;
}

}  // namespace testing_util
}  // namespace conveyor
