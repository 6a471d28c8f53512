#include "trainer/rank_training.h"

#include "runtime/status_macros.h"
#include "trainer/config_validation.h"

namespace conveyor {

bool IsLoggingRank(const ParallelState& state) {
  return state.is_last_stage() && state.coords().tp == 0 && state.coords().dp == 0;
}

absl::StatusOr<RankRun> TrainOnRank(const Config& config, ParallelState& state,
                                    const SampleSource& data, const TrainingOutputs& out) {
  if (state.pp_size() > 1) {
    return absl::UnimplementedError(
        "--pipeline-model-parallel-size > 1: pipeline parallelism is not available yet; "
        "use tensor and data parallelism");
  }
  RankRun run;
  run.tp = std::make_unique<TensorParallel>(&state.tp(), config.parallel().sequence_parallel());
  run.model = std::make_unique<GptModel>(ModelShapeFromConfig(config, PaddedVocabSize(config)),
                                         config.training().seed(), run.tp.get());
  DataParallelPlace place;
  place.dp_rank = state.coords().dp;
  place.dp_size = state.dp_size();
  place.groups.tp = &state.tp();
  place.groups.dp = &state.dp();
  place.groups.model_parallel = &state.model_parallel();
  place.groups.embedding = state.embedding();
  place.groups.sequence_parallel = config.parallel().sequence_parallel();
  place.world = &state.world();
  const TrainingOutputs outputs = IsLoggingRank(state) ? out : TrainingOutputs{};
  ASSIGN_OR_RETURN(run.result, Train(config, run.model.get(), data, outputs, place));
  return run;
}

}  // namespace conveyor
