// Text pictures of a timeline (simulated or measured), in the style of GPipe's Fig. 2(c)
// (Huang et al., 2019): one row per rank, one column per time unit, each cell the compute
// running then ("F3", "B3", "W3", with "c1" for chunk 1) or "." for idle. A fused
// backward prints as "B". Transfers are not drawn; their waits show as idle. Ranks and
// micro-batches count from 0, as everywhere else in Conveyor.
#ifndef CONVEYOR_PARALLEL_PIPELINE_GANTT_H_
#define CONVEYOR_PARALLEL_PIPELINE_GANTT_H_

#include <string>

#include "parallel/pipeline/action.h"
#include "parallel/pipeline/timeline.h"

namespace conveyor {
namespace pipeline {

// The label a chart shows for a compute action.
std::string GanttLabel(const Action& action);

// Column k covers [begin + k*time_unit, begin + (k+1)*time_unit) and shows what runs at
// its middle. Ends with a newline.
std::string GanttChart(const Timeline& timeline, double time_unit = 1.0);

}  // namespace pipeline
}  // namespace conveyor

#endif  // CONVEYOR_PARALLEL_PIPELINE_GANTT_H_
