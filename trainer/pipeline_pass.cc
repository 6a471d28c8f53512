#include "trainer/pipeline_pass.h"

#include "parallel/pipeline/executor.h"
#include "trainer/micro_batch_feed.h"

namespace conveyor {

absl::Status RunPipelinePass(const Config& config, const RankContext& context,
                             const std::vector<pipeline::Action>& actions, const PassInput& input,
                             float loss_scale, GptStage* stage,
                             std::vector<pipeline::TimedAction>* timeline) {
  const int64_t micro = config.training().micro_batch_size();
  const int64_t seq = config.model().seq_length();
  stage->BeginStep(
      MakeMicroBatchFeed(*input.source, input.iteration, input.first_sample, input.training, micro,
                         seq, context.dp_rank(), context.dp_size()),
      micro * seq, loss_scale);
  return pipeline::RunActions(actions, context.pipeline(), context.pp(), *stage, timeline);
}

}  // namespace conveyor
