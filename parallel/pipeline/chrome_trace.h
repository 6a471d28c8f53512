// A timeline as Chrome trace JSON (chrome://tracing, ui.perfetto.dev): one process per
// rank, computes on thread 0 and transfers on thread 1, so a simulated plan and a
// measured run open side by side in the same viewer.
#ifndef CONVEYOR_PARALLEL_PIPELINE_CHROME_TRACE_H_
#define CONVEYOR_PARALLEL_PIPELINE_CHROME_TRACE_H_

#include <string>

#include "parallel/pipeline/timeline.h"

namespace conveyor {
namespace pipeline {

// `microseconds_per_unit` converts the timeline's times: 1e6 for a measured timeline in
// seconds; for a simulated one, whatever a cost unit should look like. Every action is a
// complete ("X") event named by ToString, with its micro-batch and chunk in args; each
// rank also gets process and thread name ("M") events.
std::string ChromeTraceJson(const Timeline& timeline, double microseconds_per_unit = 1e6);

}  // namespace pipeline
}  // namespace conveyor

#endif  // CONVEYOR_PARALLEL_PIPELINE_CHROME_TRACE_H_
