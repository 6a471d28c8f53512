#include "parallel/pipeline/gantt.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"

namespace conveyor {
namespace pipeline {

std::string GanttLabel(const Action& action) {
  if (action.type != ActionType::kBackward) return ToString(action);
  Action as_input = action;
  as_input.type = ActionType::kBackwardInput;
  return ToString(as_input);
}

std::string GanttChart(const Timeline& timeline, double time_unit) {
  const TimelineUsage usage = MeasureUsage(timeline);
  const int columns =
      time_unit > 0 ? static_cast<int>(std::ceil(usage.makespan / time_unit - 1e-9)) : 0;
  // Every cell as wide as the widest label or column number, plus a space.
  size_t width = absl::StrCat(std::max(columns - 1, 0)).size();
  for (const auto& rank : timeline.ranks) {
    for (const TimedAction& t : rank) {
      if (IsCompute(t.action)) width = std::max(width, GanttLabel(t.action).size());
    }
  }
  ++width;
  const std::string row_name_width(absl::StrCat("rank ", timeline.ranks.size() - 1).size(), ' ');
  auto pad = [width](std::string cell) {
    cell.resize(width, ' ');
    return cell;
  };
  std::string out = absl::StrCat("t", row_name_width.substr(1), "  ");
  for (int k = 0; k < columns; ++k) out += pad(absl::StrCat(k));
  out.erase(out.find_last_not_of(' ') + 1);
  out += "\n";
  for (size_t r = 0; r < timeline.ranks.size(); ++r) {
    std::string row = absl::StrCat("rank ", r);
    row.resize(row_name_width.size(), ' ');
    row += "  ";
    for (int k = 0; k < columns; ++k) {
      const double middle = usage.begin + (k + 0.5) * time_unit;
      std::string cell = ".";
      for (const TimedAction& t : timeline.ranks[r]) {
        if (IsCompute(t.action) && t.start <= middle && middle < t.end) {
          cell = GanttLabel(t.action);
          break;
        }
      }
      row += pad(cell);
    }
    row.erase(row.find_last_not_of(' ') + 1);
    out += row + "\n";
  }
  return out;
}

}  // namespace pipeline
}  // namespace conveyor
