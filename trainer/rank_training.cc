#include "trainer/rank_training.h"

#include "model/pipeline_split.h"
#include "parallel/pipeline/schedule.h"
#include "runtime/status_macros.h"
#include "trainer/config_validation.h"

namespace conveyor {

bool IsLoggingRank(const ParallelState& state) {
  return state.is_last_stage() && state.coords().tp == 0 && state.coords().dp == 0;
}

absl::StatusOr<RankRun> BuildRankModel(const Config& config, ParallelState& state,
                                       const Backend& backend) {
  ASSIGN_OR_RETURN(const pipeline::Schedule schedule,
                   pipeline::ScheduleByName(config.parallel().pipeline_schedule()));
  ASSIGN_OR_RETURN(const std::vector<int64_t> layers, LayersPerStage(config));
  RankRun run;
  run.tp = std::make_unique<TensorParallel>(&state.tp(), config.parallel().sequence_parallel(),
                                            backend.ops);
  const pipeline::ExecutorPlace place{schedule.layout, state.pp_size(),
                                      config.parallel().num_virtual_stages_per_pipeline_rank(),
                                      state.coords().pp};
  run.stage = std::make_unique<GptStage>(ModelShapeFromConfig(config, PaddedVocabSize(config)),
                                         config.training().seed(), run.tp.get(), place, layers,
                                         RecomputePolicyFromConfig(config), backend.ops);
  return run;
}

absl::StatusOr<RankRun> TrainOnRank(const Config& config, ParallelState& state,
                                    const SampleSource& data, const TrainingOutputs& out,
                                    const EvaluationSplits& held_out, const Backend& backend) {
  ASSIGN_OR_RETURN(RankRun run, BuildRankModel(config, state, backend));
  RankPlace place;
  place.dp_rank = state.coords().dp;
  place.dp_size = state.dp_size();
  place.groups.tp = &state.tp();
  place.groups.dp = &state.dp();
  place.groups.model_parallel = &state.model_parallel();
  place.groups.sequence_parallel = config.parallel().sequence_parallel();
  // Tied embeddings: with the loop layout the first stage (pipeline rank 0) and the
  // last (rank P-1) hold copies and sum their gradients over the embedding group; in
  // the V-shape both live on rank 0 and the stage sums them itself.
  if (const Parameter* copy = run.stage->TiedCopyInHead()) {
    place.groups.norm_excluded.push_back(copy);
  }
  if (!config.model().untie_embeddings_and_output_weights() && state.pp_size() > 1 &&
      run.stage->place().layout == pipeline::StageLayout::kLoop) {
    place.groups.embedding = state.embedding();  // null on middle stages
  }
  place.world = &state.world();
  place.pp = state.pp_size() > 1 ? &state.pp() : nullptr;
  place.pipeline = run.stage->place();
  place.optimizer_ops = backend.optimizer;
  const TrainingOutputs outputs = IsLoggingRank(state) ? out : TrainingOutputs{};
  ASSIGN_OR_RETURN(run.result, Train(config, run.stage.get(), data, outputs, place, held_out));
  return run;
}

}  // namespace conveyor
