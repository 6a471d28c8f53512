#include "trainer/rehearsal.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_format.h"
#include "parallel/pipeline/executor.h"
#include "parallel/pipeline/rehearsal_stage.h"
#include "parallel/pipeline/schedule.h"
#include "runtime/status_macros.h"
#include "trainer/pipeline_report.h"

namespace conveyor {

absl::StatusOr<RehearsalResult> RunRehearsal(const Config& config, ParallelState& state,
                                             std::ostream* log) {
  const ParallelConfig& p = config.parallel();
  const int P = state.pp_size();
  const int V = std::max(1, p.num_virtual_stages_per_pipeline_rank());
  const int M = config.training().num_micro_batches();
  const double unit = p.pipeline_rehearsal_ms() / 1e3;
  ASSIGN_OR_RETURN(const pipeline::Costs costs, ParsePipelineCosts(p.pipeline_costs()));
  ASSIGN_OR_RETURN(const pipeline::Schedule schedule,
                   pipeline::ScheduleByName(p.pipeline_schedule()));
  ASSIGN_OR_RETURN(const pipeline::Plan plan, pipeline::MakePlan(schedule.name, P, V, M));
  ASSIGN_OR_RETURN(const pipeline::SimulationResult simulated, pipeline::Simulate(plan, costs));

  const int64_t boundary = int64_t{config.training().micro_batch_size()} *
                           config.model().seq_length() * config.model().hidden_size() /
                           (p.sequence_parallel() ? p.tensor_model_parallel_size() : 1);
  pipeline::RehearsalStage stage(costs, unit, boundary);
  const pipeline::ExecutorPlace place{schedule.layout, P, V, state.coords().pp};
  Communicator* pp = P > 1 ? &state.pp() : nullptr;

  RehearsalResult result;
  result.simulated_seconds = simulated.makespan * unit;
  const int steps = config.training().train_iters();
  double total = 0;
  for (int step = 0; step < steps; ++step) {
    if (pp != nullptr) RETURN_IF_ERROR(pp->Barrier());  // start together, as the simulator does
    result.last_step.clear();
    const auto start = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(
        pipeline::RunActions(plan.ranks[place.rank], place, stage, pp, &result.last_step));
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (pp != nullptr) RETURN_IF_ERROR(pp->AllReduceMax(&seconds, 1));
    total += seconds;
  }
  result.measured_seconds = total / steps;
  if (log != nullptr) {
    *log << absl::StrFormat(
        "rehearsal: %s P=%d V=%d M=%d, costs F,B,W = %s x %.1f ms: measured makespan %.1f ms, "
        "simulated %.1f ms (%+.1f%%), mean of %d steps\n",
        schedule.name, P, V, M, p.pipeline_costs(), p.pipeline_rehearsal_ms(),
        1e3 * result.measured_seconds, 1e3 * result.simulated_seconds,
        100 * (result.measured_seconds / result.simulated_seconds - 1), steps);
  }
  return result;
}

}  // namespace conveyor
