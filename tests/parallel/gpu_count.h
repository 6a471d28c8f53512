// How many CUDA devices a multi-rank GPU test may use. The probe runs in a forked
// child: a CUDA context does not survive fork(), so the parent, which forks the ranks
// afterwards, must never touch CUDA itself.
#ifndef CONVEYOR_TESTS_PARALLEL_GPU_COUNT_H_
#define CONVEYOR_TESTS_PARALLEL_GPU_COUNT_H_

#include <string>

namespace conveyor {
namespace testing_util {

// The number of usable CUDA devices; when 0, `why` says why (no driver, no device...).
int CountGpusInChild(std::string* why);

}  // namespace testing_util
}  // namespace conveyor

#endif  // CONVEYOR_TESTS_PARALLEL_GPU_COUNT_H_
