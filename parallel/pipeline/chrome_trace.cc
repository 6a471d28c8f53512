#include "parallel/pipeline/chrome_trace.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace conveyor {
namespace pipeline {

std::string ChromeTraceJson(const Timeline& timeline, double microseconds_per_unit) {
  std::vector<std::string> events;
  for (size_t rank = 0; rank < timeline.ranks.size(); ++rank) {
    events.push_back(absl::StrFormat(
        R"({"name":"process_name","ph":"M","pid":%d,"args":{"name":"pipeline rank %d"}})", rank,
        rank));
    events.push_back(absl::StrFormat(
        R"({"name":"thread_name","ph":"M","pid":%d,"tid":0,"args":{"name":"compute"}})", rank));
    events.push_back(absl::StrFormat(
        R"({"name":"thread_name","ph":"M","pid":%d,"tid":1,"args":{"name":"p2p"}})", rank));
    for (const TimedAction& t : timeline.ranks[rank]) {
      const bool compute = IsCompute(t.action);
      // Action names are letters, digits and '<' '>': nothing to escape.
      events.push_back(absl::StrFormat(
          R"({"name":"%s","cat":"%s","ph":"X","pid":%d,"tid":%d,"ts":%.3f,"dur":%.3f,)"
          R"("args":{"micro_batch":%d,"chunk":%d}})",
          ToString(t.action), compute ? "compute" : "p2p", rank, compute ? 0 : 1,
          t.start * microseconds_per_unit, (t.end - t.start) * microseconds_per_unit,
          t.action.micro_batch, t.action.chunk));
    }
  }
  return absl::StrCat("{\"traceEvents\":[\n", absl::StrJoin(events, ",\n"),
                      "\n],\"displayTimeUnit\":\"ms\"}\n");
}

}  // namespace pipeline
}  // namespace conveyor
