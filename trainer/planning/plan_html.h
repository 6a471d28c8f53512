// --dry-run --plan-html FILE: the plan as one self-contained HTML page
// (trainer/planning/plan_page.html: inline SVG and script, nothing fetched), for a reader who wants to see
// the schedule rather than read it: the simulated schedule's Gantt chart per pipeline rank
// (forward, backward, weight gradient, idle shaded as the bubble), memory per pipeline rank as
// stacked bars (weights, gradients, optimizer state, activations), and the batch arithmetic. The
// figures are the --dry-run text's (trainer/planning/plan.h), computed by the same functions; the page
// carries them as one JSON block (<script id="plan-data">) that its script draws from and that
// tools can read.
#ifndef CONVEYOR_TRAINER_PLANNING_PLAN_HTML_H_
#define CONVEYOR_TRAINER_PLANNING_PLAN_HTML_H_

#include <string>

#include "absl/status/statusor.h"
#include "model/model_shape.h"
#include "trainer/config/resolved_config.h"

namespace conveyor {

absl::StatusOr<std::string> PlanHtml(const ResolvedConfig& resolved);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_PLANNING_PLAN_HTML_H_
