#include "trainer/rank_training.h"

#include "base/status_macros.h"
#include "trainer/profiler/step_profiler.h"

namespace conveyor {

bool IsLoggingRank(const ParallelState& state) {
  return state.is_last_stage() && state.coords().tp == 0 && state.coords().dp == 0 &&
         state.coords().cp == 0;
}

bool IsTensorBoardRank(const ParallelState& state) {
  return state.rank() == state.world_size() - 1;
}

absl::StatusOr<RankRun> BuildRankModel(const ResolvedConfig& resolved, const RankContext& context,
                                       const Backend& backend) {
  RankRun run;
  run.tp = std::make_unique<TensorParallel>(&context.tp(), context.sequence_parallel(),
                                            ExpertGroups{&context.ep(), &context.expert_tp()});
  run.stage = std::make_unique<GptStage>(
      resolved.model_shape(), resolved.config().training().seed(), run.tp.get(),
      context.pipeline(), resolved.layers_per_stage(), resolved.recompute_policy(), backend.ops);
  return run;
}

absl::StatusOr<RankRun> TrainOnRank(const ResolvedConfig& resolved, ParallelState& state,
                                    const SampleSource& data, const TrainingOutputs& out,
                                    const EvaluationSplits& held_out, const Backend& backend) {
  const Config& config = resolved.config();
  ASSIGN_OR_RETURN(const RankContext context, RankContext::Create(state, resolved));
  Backend model_backend = backend;
  std::unique_ptr<profiler::ProfilingOps> profiling_ops;
  if (profiler::StepProfiler(config.logging(), context.world().rank()).enabled()) {
    profiling_ops = std::make_unique<profiler::ProfilingOps>(backend.ops);
    model_backend.ops = profiling_ops.get();
  }
  ASSIGN_OR_RETURN(RankRun run, BuildRankModel(resolved, context, model_backend));
  run.profiling_ops = std::move(profiling_ops);
  TrainingOutputs outputs = IsLoggingRank(state) ? out : TrainingOutputs{};
  outputs.tensorboard = out.tensorboard;  // made on IsTensorBoardRank only
  ASSIGN_OR_RETURN(run.result, Train(resolved, context, run.stage.get(), data, outputs, held_out,
                                     *backend.optimizer));
  return run;
}

}  // namespace conveyor
