#include "tests/parallel/multi_rank.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "parallel/directory_store.h"
#include "parallel/group.h"

namespace conveyor {
namespace testing_util {

absl::StatusOr<std::unique_ptr<GlooCommunicator>> ConnectWorld(const RankEnvironment& env,
                                                               absl::Duration timeout) {
  GroupSpec spec;
  for (int r = 0; r < env.world_size; ++r) spec.global_ranks.push_back(r);
  spec.name = GroupName("world", spec.global_ranks);
  spec.rank = env.rank;
  absl::StatusOr<std::shared_ptr<gloo::transport::Device>> device = CreateGlooDevice("127.0.0.1");
  if (!device.ok()) return device.status();
  return GlooCommunicator::Create(spec, DirectoryRendezvous(env.run_dir), *device, timeout);
}

int Fail(const RankEnvironment& env, const std::string& message) {
  std::fprintf(stderr, "rank %d: %s\n", env.rank, message.c_str());
  return 1;
}

void WriteFile(const std::string& path, const std::string& contents) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    out << contents;
  }
  std::rename(tmp.c_str(), path.c_str());
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

bool ProcessGone(pid_t pid) {
  if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
  // A zombie still answers kill(); its state in /proc is 'Z'.
  const std::string stat = ReadFile(absl::StrCat("/proc/", pid, "/stat"));
  const size_t paren = stat.rfind(')');
  return stat.empty() ||
         (paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z');
}

bool WaitForFile(const std::string& path, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (::access(path.c_str(), F_OK) != 0) {
    if (absl::Now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

}  // namespace testing_util
}  // namespace conveyor
