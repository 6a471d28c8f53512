// --dry-run: the plan of a real configuration, every prediction of docs/design.md §10-11,
// computed without training: the rank layout, the micro-batch arithmetic, the
// schedule's Gantt chart and bubble (formula and simulation), memory per pipeline rank
// (model state and activations, from the memory model), and the traffic of a step.
#ifndef CONVEYOR_TRAINER_PLANNING_PLAN_H_
#define CONVEYOR_TRAINER_PLANNING_PLAN_H_

#include <string>

#include "absl/status/statusor.h"
#include "model/model_shape.h"
#include "trainer/config/resolved_config.h"

namespace conveyor {

absl::StatusOr<std::string> FormatPlan(const ResolvedConfig& resolved);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_PLANNING_PLAN_H_
