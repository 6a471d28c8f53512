#include "trainer/reporting/tensorboard/event_file.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "trainer/checkpoint/file_io.h"
#include "trainer/reporting/tensorboard/record_framing.h"

namespace conveyor::tensorboard {
namespace {

double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string HostName() {
  char name[256] = {};
  return gethostname(name, sizeof(name) - 1) == 0 ? name : "localhost";
}

}  // namespace

absl::StatusOr<std::unique_ptr<EventFile>> EventFile::Create(const std::string& dir) {
  if (absl::Status made = MakeDirs(dir); !made.ok()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "--tensorboard-dir %s: %s; choose a folder this process can create and write", dir,
        made.message()));
  }
  const double now = NowSeconds();
  std::unique_ptr<EventFile> file(new EventFile(absl::StrFormat(
      "%s/events.out.tfevents.%d.%s.%d", dir, static_cast<int64_t>(now), HostName(), getpid())));
  file->out_.open(file->path_, std::ios::binary | std::ios::app);
  if (!file->out_) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "--tensorboard-dir %s: cannot create %s; choose a writable folder", dir, file->path_));
  }
  Event version;
  version.set_wall_time(now);
  version.set_file_version("brain.Event:2");
  RETURN_IF_ERROR(file->Append({version}));
  return file;
}

absl::Status EventFile::Append(const std::vector<Event>& events) {
  errno = 0;
  for (const Event& event : events) out_ << FrameRecord(event.SerializeAsString());
  out_.flush();
  if (!out_) {
    // The stream keeps no error of its own: errno is the failed write(2)'s. A failure
    // while running (exit 1, base/exit_code.h), not a damaged input.
    return absl::UnavailableError(absl::StrFormat(
        "--tensorboard-dir: cannot write %s (%s); TensorBoard logging stopped", path_,
        errno != 0 ? std::strerror(errno) : "disk full?"));
  }
  return absl::OkStatus();
}

}  // namespace conveyor::tensorboard
