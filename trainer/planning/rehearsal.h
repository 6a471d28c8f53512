// --pipeline-rehearsal-ms: runs the configured schedule with a RehearsalStage (every
// action sleeps its --pipeline-costs, transfers are real) instead of training, and
// reports the measured makespan beside the simulator's. What is left over is the
// executor's and the transfers' cost.
#ifndef CONVEYOR_TRAINER_PLANNING_REHEARSAL_H_
#define CONVEYOR_TRAINER_PLANNING_REHEARSAL_H_

#include <ostream>
#include <vector>

#include "absl/status/statusor.h"
#include "parallel/parallel_state.h"
#include "parallel/pipeline/timeline.h"
#include "trainer/config/resolved_config.h"

namespace conveyor {

struct RehearsalResult {
  double measured_seconds = 0;   // mean makespan per step, max over pipeline ranks
  double simulated_seconds = 0;  // the simulator's makespan for the same costs
  // The actions this rank ran in its last step, in the order it ran them.
  std::vector<pipeline::TimedAction> last_step;
};

// Runs --train-iters steps; writes the report to `log`
// (may be null). Every rank of the job calls it.
absl::StatusOr<RehearsalResult> RunRehearsal(const ResolvedConfig& resolved, ParallelState& state,
                                             std::ostream* log);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_PLANNING_REHEARSAL_H_
