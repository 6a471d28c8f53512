// Helpers for tests that fork ranks with LaunchLocalRanks. gtest assertions do not
// cross fork(), so rank code reports failures by message and exit code, and leaves
// results in files for the test (the parent) to compare.
#ifndef CONVEYOR_TESTS_PARALLEL_MULTI_RANK_H_
#define CONVEYOR_TESTS_PARALLEL_MULTI_RANK_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "parallel/gloo_communicator.h"
#include "parallel/rank_environment.h"

namespace conveyor {
namespace testing_util {

// The world group of `env` as a gloo communicator on loopback.
absl::StatusOr<std::unique_ptr<GlooCommunicator>> ConnectWorld(const RankEnvironment& env,
                                                               absl::Duration timeout);

// Prints "rank R: message" to stderr and returns 1, for `return Fail(...)`.
int Fail(const RankEnvironment& env, const std::string& message);

void WriteFile(const std::string& path, const std::string& contents);
std::string ReadFile(const std::string& path);  // empty when missing

// True when `pid` no longer exists or is a zombie (reaped by init later).
bool ProcessGone(pid_t pid);

// Blocks up to `timeout` until `path` exists.
bool WaitForFile(const std::string& path, absl::Duration timeout);

}  // namespace testing_util
}  // namespace conveyor

#endif  // CONVEYOR_TESTS_PARALLEL_MULTI_RANK_H_
