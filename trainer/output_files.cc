#include "trainer/output_files.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/str_format.h"
#include "base/atomic_file.h"
#include "base/status_macros.h"
#include "trainer/checkpoint/file_io.h"

namespace conveyor {
namespace {

// Whether this process may create files in `folder`; else the errno text of access(2).
absl::Status CheckCanCreateIn(const std::string& flag, const std::string& path,
                              const std::string& folder) {
  if (::access(folder.c_str(), W_OK | X_OK) == 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s %s: this process may not create files in %s (%s); choose a writable folder "
      "(checked before training, so that the run does not fail when it writes)",
      flag, path, folder, std::strerror(errno)));
}

// `beside`: the run also creates files next to `path` (a trace's per-rank parts), so
// its folder must take new files even when `path` exists.
absl::Status CheckOutputFile(const std::string& flag, const std::string& path, bool beside) {
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
  if (!PathExists(path) || beside) RETURN_IF_ERROR(CheckCanCreateIn(flag, path, folder));
  // An existing file is appended to (--metrics-file) or replaced: either needs write access.
  if (PathExists(path) && ::access(path.c_str(), W_OK) != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s %s: this process may not write the file (%s); choose another path or make it "
        "writable",
        flag, path, std::strerror(errno)));
  }
  return absl::OkStatus();
}

// --tensorboard-dir is created with its parents when missing: its nearest existing
// ancestor must be a folder this process may create in.
absl::Status CheckOutputFolder(const std::string& flag, const std::string& dir) {
  if (dir.empty()) return absl::OkStatus();
  std::string existing = dir;
  while (!PathExists(existing) && existing != FolderOf(existing)) existing = FolderOf(existing);
  if (!IsDirectory(existing)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s %s: %s is a file, not a folder; choose another path", flag, dir, existing));
  }
  return CheckCanCreateIn(flag, dir, existing);
}

// Megatron's window: the profile starts once --profile-step-start iterations are done
// and stops after iteration --profile-step-end. A window that starts at or after the
// last iteration records nothing.
absl::Status CheckProfileWindow(const Config& config) {
  const LoggingConfig& l = config.logging();
  const int64_t iters = config.training().train_iters();
  if (!l.profile() || l.profile_step_start() < iters) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "--profile-step-start %d: the run ends after --train-iters %d, so the profile "
      "(iterations %d to %d) would record nothing; lower --profile-step-start below %d",
      l.profile_step_start(), iters, l.profile_step_start() + 1, l.profile_step_end(), iters));
}

}  // namespace

absl::Status CheckOutputFiles(const Config& config) {
  const LoggingConfig& l = config.logging();
  RETURN_IF_ERROR(CheckOutputFile("--metrics-file", l.metrics_file(), /*beside=*/false));
  RETURN_IF_ERROR(CheckOutputFile("--trace-file", l.trace_file(), /*beside=*/true));
  if (l.profile()) {
    RETURN_IF_ERROR(CheckOutputFile("--profile-file", l.profile_file(), /*beside=*/true));
  }
  RETURN_IF_ERROR(CheckOutputFolder("--tensorboard-dir", l.tensorboard_dir()));
  return CheckProfileWindow(config);
}

std::string ProfileWindowWarning(const Config& config) {
  const LoggingConfig& l = config.logging();
  const int64_t iters = config.training().train_iters();
  if (!l.profile() || l.profile_step_end() <= iters) return "";
  return absl::StrFormat(
      "warning: --profile-step-end %d is past --train-iters %d: the profile records "
      "iterations %d to %d only",
      l.profile_step_end(), iters, l.profile_step_start() + 1, iters);
}

}  // namespace conveyor
