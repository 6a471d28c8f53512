#include "trainer/output_files.h"

#include <unistd.h>

#include <string>
#include <utility>

#include "absl/strings/str_format.h"
#include "base/atomic_file.h"
#include "trainer/checkpoint/file_io.h"

namespace conveyor {
namespace {

absl::Status CheckOutputFile(const std::string& flag, const std::string& path) {
  if (path.empty()) return absl::OkStatus();
  if (IsDirectory(path)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s %s is a folder; give the path of a file to write (e.g. %s/run.json)",
                        flag, path, path));
  }
  const std::string folder = FolderOf(path);
  if (!IsDirectory(folder)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s %s: the folder %s does not exist; create it (mkdir -p %s) or choose another path "
        "(checked before training, so that the run does not fail when it writes)",
        flag, path, folder, folder));
  }
  if (::access(folder.c_str(), W_OK | X_OK) != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s %s: this process may not create files in %s; choose a writable folder",
                        flag, path, folder));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckOutputFiles(const Config& config) {
  const std::pair<const char*, const std::string*> outputs[] = {
      {"--metrics-file", &config.logging().metrics_file()},
      {"--trace-file", &config.logging().trace_file()},
  };
  for (const auto& [flag, path] : outputs) {
    if (absl::Status s = CheckOutputFile(flag, *path); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace conveyor
