#include "trainer/pipeline_pass.h"

#include <utility>

#include "parallel/pipeline/executor.h"
#include "trainer/config/document_masking.h"
#include "trainer/micro_batch_feed.h"

namespace conveyor {

absl::Status RunPipelinePass(const ResolvedConfig& resolved, const RankContext& context,
                             const std::vector<pipeline::Action>& actions, const PassInput& input,
                             const LossWeighting& weighting, GptStage* stage,
                             std::vector<pipeline::TimedAction>* timeline) {
  const Config& config = resolved.config();
  const int64_t micro = config.training().micro_batch_size();
  const int64_t seq = config.model().seq_length();
  // Every context-parallel rank reads the same samples; the model keeps its chunks.
  MicroBatchFeed samples =
      MakeMicroBatchFeed(*input.source, input.iteration, input.first_sample, input.training, micro,
                         seq, context.dp_rank(), context.dp_size(), DocumentMaskingOf(config));
  stage->BeginStep(std::move(samples), micro * seq / context.cp().size(), weighting);
  return pipeline::RunActions(actions, context.pipeline(), context.pp(), *stage, timeline);
}

}  // namespace conveyor
