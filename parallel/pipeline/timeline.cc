#include "parallel/pipeline/timeline.h"

#include <algorithm>
#include <limits>

namespace conveyor {
namespace pipeline {

TimelineUsage MeasureUsage(const Timeline& timeline) {
  TimelineUsage usage;
  double begin = std::numeric_limits<double>::infinity();
  double end = -std::numeric_limits<double>::infinity();
  for (const auto& rank : timeline.ranks) {
    for (const TimedAction& t : rank) {
      begin = std::min(begin, t.start);
      end = std::max(end, t.end);
    }
  }
  if (begin > end) begin = end = 0;  // nothing ran
  usage.begin = begin;
  usage.makespan = end - begin;
  double idle_sum = 0;
  for (const auto& rank : timeline.ranks) {
    RankUsage r;
    for (const TimedAction& t : rank) {
      if (IsCompute(t.action)) r.busy += t.end - t.start;
    }
    r.idle = usage.makespan - r.busy;
    r.bubble_fraction = usage.makespan > 0 ? r.idle / usage.makespan : 0;
    idle_sum += r.idle;
    usage.ranks.push_back(r);
  }
  const double total = usage.makespan * static_cast<double>(timeline.ranks.size());
  usage.bubble_fraction = total > 0 ? idle_sum / total : 0;
  return usage;
}

}  // namespace pipeline
}  // namespace conveyor
