#include "trainer/profiler/step_profiler.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "base/status_macros.h"
#include "profiler/recorder.h"

namespace conveyor::profiler {
namespace {

std::string JsonString(const std::string& s) {
  return absl::StrCat("\"", absl::StrReplaceAll(s, {{"\\", "\\\\"}, {"\"", "\\\""}}), "\"");
}

// One complete ("X") event of the Chrome trace format, one line.
std::string EventJson(const Span& s, int pid) {
  return absl::StrFormat(
      "{\"name\": %s, \"cat\": \"%s\", \"ph\": \"X\", \"pid\": %d, \"tid\": %d, \"ts\": %.3f, "
      "\"dur\": %.3f, \"args\": {%s}}",
      JsonString(s.name), s.category, pid, s.thread, s.start_us, s.end_us - s.start_us, s.args);
}

std::string NameJson(const char* what, int pid, int tid, const std::string& name) {
  return absl::StrFormat(
      "{\"name\": \"%s\", \"ph\": \"M\", \"pid\": %d, \"tid\": %d, \"args\": {\"name\": %s}}", what,
      pid, tid, JsonString(name));
}

}  // namespace

StepProfiler::StepProfiler(const LoggingConfig& logging, int world_rank)
    : logging_(logging),
      enabled_(logging.profile() && (logging.profile_ranks().empty() ||
                                     std::count(logging.profile_ranks().begin(),
                                                logging.profile_ranks().end(), world_rank) > 0)) {}

bool StepProfiler::profiling(int64_t iteration) const {
  return enabled_ && iteration > logging_.profile_step_start() &&
         iteration <= logging_.profile_step_end();
}

void StepProfiler::BeforeStep(int64_t iteration) {
  if (profiling(iteration)) Recorder::Global().Start();
}

void StepProfiler::AfterStep(int64_t iteration) {
  if (profiling(iteration)) Recorder::Global().Stop();
}

absl::Status StepProfiler::Finish(const std::string& process_name, Communicator& world) {
  if (!logging_.profile()) return absl::OkStatus();
  const std::string& path = logging_.profile_file();
  const std::string part = absl::StrFormat("%s.rank%d", path, world.rank());
  if (enabled_) {
    std::ofstream f(part);
    const int pid = world.rank();
    f << NameJson("process_name", pid, 0, process_name) << ",\n";
    const std::vector<std::string> threads = Recorder::Global().ThreadNames();
    for (size_t t = 0; t < threads.size(); ++t) {
      f << NameJson("thread_name", pid, static_cast<int>(t), threads[t]) << ",\n";
    }
    for (const Span& s : Recorder::Global().Take()) f << EventJson(s, pid) << ",\n";
    if (!f) return absl::InternalError(absl::StrCat("--profile-file: cannot write ", part));
  }
  RETURN_IF_ERROR(world.Barrier());
  if (world.rank() == 0) {
    std::string events;
    for (int r = 0; r < world.size(); ++r) {
      const std::string name = absl::StrFormat("%s.rank%d", path, r);
      std::ifstream f(name);
      if (!f) continue;  // a rank not profiled
      std::stringstream text;
      text << f.rdbuf();
      events += text.str();
      std::remove(name.c_str());
    }
    if (!events.empty()) events.resize(events.size() - 2);  // the last ",\n"
    std::ofstream out(path);
    out << "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n" << events << "\n]}\n";
    if (!out) return absl::InternalError(absl::StrCat("--profile-file: cannot write ", path));
  }
  return world.Barrier();
}

}  // namespace conveyor::profiler
