#include "trainer/reporting/step_profiler.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "base/atomic_file.h"
#include "base/status_macros.h"
#include "parallel/string_gather.h"
#include "profiler/recorder.h"
#include "trainer/reporting/line_file.h"

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

std::string StepProfiler::ResumedPastTheWindow(int64_t resumed_iteration) const {
  if (!enabled_ || logging_.profile_step_end() > resumed_iteration) return "";
  return absl::StrFormat(
      "warning: --profile records iterations %d to %d, but this run resumes after iteration "
      "%d: the trace --profile-file writes will hold no iteration; move the window "
      "(--profile-step-start, --profile-step-end) after %d",
      logging_.profile_step_start() + 1, logging_.profile_step_end(), resumed_iteration,
      resumed_iteration);
}

void StepProfiler::BeforeStep(int64_t iteration) {
  if (profiling(iteration)) Recorder::Global().Start();
}

void StepProfiler::AfterStep(int64_t iteration) {
  if (profiling(iteration)) Recorder::Global().Stop();
}

absl::Status StepProfiler::Finish(const std::string& process_name, Communicator& world) {
  if (!logging_.profile()) return absl::OkStatus();
  // This rank's events, one per line, each followed by ",\n"; empty when not profiled.
  std::string text;
  if (enabled_) {
    text = NameJson("process_name", world.rank(), 0, process_name) + ",\n";
    const std::vector<std::string> threads = Recorder::Global().ThreadNames();
    for (size_t t = 0; t < threads.size(); ++t) {
      absl::StrAppend(&text, NameJson("thread_name", world.rank(), static_cast<int>(t), threads[t]),
                      ",\n");
    }
    for (const Span& s : Recorder::Global().Take()) {
      absl::StrAppend(&text, EventJson(s, world.rank()), ",\n");
    }
  }
  // Over the world group, so that ranks on nodes that share no folder are merged too.
  ASSIGN_OR_RETURN(const std::vector<std::string> parts,
                   GatherStringsToRoot(world, text, /*root=*/0));
  if (world.rank() != 0) return absl::OkStatus();
  std::string events = absl::StrJoin(parts, "");
  if (!events.empty()) events.resize(events.size() - 2);  // the last ",\n"
  // Every write checked, close included (base/atomic_file.h), with the errno text.
  RETURN_IF_ERROR(OutputWriteFailure(WriteFile(
      logging_.profile_file(),
      absl::StrCat("{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n", events, "\n]}\n"),
      Durability::kVisible)))
      << "--profile-file";
  return absl::OkStatus();
}

}  // namespace conveyor::profiler
