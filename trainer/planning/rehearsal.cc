#include "trainer/planning/rehearsal.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "model/model_shape.h"
#include "parallel/pipeline/executor.h"
#include "parallel/pipeline/rehearsal_stage.h"
#include "parallel/pipeline/schedule.h"
#include "trainer/planning/pipeline_report.h"

namespace conveyor {

absl::StatusOr<RehearsalResult> RunRehearsal(const ResolvedConfig& resolved, ParallelState& state,
                                             std::ostream* log) {
  const Config& config = resolved.config();
  const ParallelConfig& p = config.parallel();
  const int P = state.pp_size();
  const int V = resolved.virtual_stages();
  const int M = resolved.micro_batches();
  const double unit = p.pipeline_rehearsal_ms() / 1e3;
  ASSIGN_OR_RETURN(const pipeline::Costs costs, ParsePipelineCosts(p.pipeline_costs()));
  ASSIGN_OR_RETURN(const pipeline::Schedule schedule,
                   pipeline::ScheduleByName(p.pipeline_schedule()));
  ASSIGN_OR_RETURN(const pipeline::Plan plan, pipeline::MakePlan(schedule.name, P, V, M));
  ASSIGN_OR_RETURN(const pipeline::SimulationResult simulated, pipeline::Simulate(plan, costs));

  const int64_t boundary = PipelineMessageElements(
      int64_t{config.training().micro_batch_size()} * config.model().seq_length(),
      config.model().hidden_size(), p.tensor_model_parallel_size(), p.sequence_parallel());
  pipeline::RehearsalStage stage(costs, unit, boundary);
  const pipeline::PipelinePlace place{schedule.layout, P, V, state.coords().pp};
  Communicator& pp = state.pp();

  RehearsalResult result;
  result.simulated_seconds = simulated.makespan * unit;
  const int steps = config.training().train_iters();
  double total = 0;
  for (int step = 0; step < steps; ++step) {
    RETURN_IF_ERROR(pp.Barrier());  // start together, as the simulator does
    result.last_step.clear();
    const auto start = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(
        pipeline::RunActions(plan.ranks[place.rank], place, pp, stage, &result.last_step));
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    RETURN_IF_ERROR(pp.AllReduceMax(&seconds, 1));
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
