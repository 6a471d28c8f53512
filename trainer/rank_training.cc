#include "trainer/rank_training.h"

#include "base/status_macros.h"
#include "model/pipeline_split.h"

namespace conveyor {

bool IsLoggingRank(const ParallelState& state) {
  return state.is_last_stage() && state.coords().tp == 0 && state.coords().dp == 0;
}

absl::StatusOr<RankRun> BuildRankModel(const ResolvedConfig& resolved, const RankContext& context,
                                       const Backend& backend) {
  const Config& config = resolved.config();
  ASSIGN_OR_RETURN(const std::vector<int64_t> layers, LayersPerStage(config));
  RankRun run;
  run.tp =
      std::make_unique<TensorParallel>(&context.tp(), context.sequence_parallel(), backend.ops);
  run.stage = std::make_unique<GptStage>(ModelShapeFromConfig(config, resolved.padded_vocab_size()),
                                         config.training().seed(), run.tp.get(), context.pipeline(),
                                         layers, RecomputePolicyFromConfig(config), backend.ops);
  return run;
}

absl::StatusOr<RankRun> TrainOnRank(const ResolvedConfig& resolved, ParallelState& state,
                                    const SampleSource& data, const TrainingOutputs& out,
                                    const EvaluationSplits& held_out, const Backend& backend) {
  const Config& config = resolved.config();
  ASSIGN_OR_RETURN(const RankContext context, RankContext::Create(state, config));
  ASSIGN_OR_RETURN(RankRun run, BuildRankModel(resolved, context, backend));
  const TrainingOutputs outputs = IsLoggingRank(state) ? out : TrainingOutputs{};
  ASSIGN_OR_RETURN(run.result, Train(config, context, run.stage.get(), data, outputs, held_out,
                                     *backend.optimizer));
  return run;
}

}  // namespace conveyor
