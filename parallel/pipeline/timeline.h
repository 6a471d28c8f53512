// What each rank did and when: filled by the simulator (in cost units) or by the
// executor (in seconds), and read by the Gantt chart, the Chrome trace and the bubble
// measurement, so predicted and measured runs are reported the same way.
#ifndef CONVEYOR_PARALLEL_PIPELINE_TIMELINE_H_
#define CONVEYOR_PARALLEL_PIPELINE_TIMELINE_H_

#include <vector>

#include "parallel/pipeline/action.h"

namespace conveyor {
namespace pipeline {

struct TimedAction {
  Action action;
  double start = 0;
  double end = 0;
};

struct Timeline {
  // Per rank, in the order the actions ran. Transfers may be included; for them
  // [start, end) is from posting the batch to the transfer's completion.
  std::vector<std::vector<TimedAction>> ranks;
};

struct RankUsage {
  double busy = 0;             // time in compute actions
  double idle = 0;             // makespan - busy: waiting for data, transfers, fill and drain
  double bubble_fraction = 0;  // idle / makespan
};

struct TimelineUsage {
  // From the earliest start to the latest end over all ranks.
  double begin = 0;
  double makespan = 0;
  std::vector<RankUsage> ranks;
  // Sum of idle over sum of makespan, i.e. the mean of the ranks' bubble fractions.
  double bubble_fraction = 0;
};

// Bubble as docs/design.md §10 defines it: idle over wall-clock, per rank against
// the whole pipeline's makespan, so a rank that starts late counts its wait.
TimelineUsage MeasureUsage(const Timeline& timeline);

}  // namespace pipeline
}  // namespace conveyor

#endif  // CONVEYOR_PARALLEL_PIPELINE_TIMELINE_H_
