// One pass of this rank's pipeline actions over a step's micro-batches, the path
// training (its schedule's actions) and evaluation (forward-only actions) share: the
// stage starts the step on the micro-batches this data-parallel rank reads, then the
// executor runs the actions.
#ifndef CONVEYOR_TRAINER_PIPELINE_PASS_H_
#define CONVEYOR_TRAINER_PIPELINE_PASS_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "data/sample_source.h"
#include "model/gpt_stage.h"
#include "model/masked_loss.h"
#include "parallel/pipeline/action.h"
#include "parallel/pipeline/timeline.h"
#include "trainer/config/resolved_config.h"
#include "trainer/rank_context.h"

namespace conveyor {

// Where a pass reads: the global batch of `source` that starts at `first_sample`.
// Training passes name their iteration (dropout is keyed by it); evaluation's run
// without dropout.
struct PassInput {
  const SampleSource* source = nullptr;
  int64_t first_sample = 0;
  bool training = false;
  int64_t iteration = 0;  // training only
};

// Each micro-batch's loss weighs as `weighting` says in the gradient; the micro-batches
// carry the document masks the config asks for. `timeline` as in pipeline::RunActions
// (may be null).
absl::Status RunPipelinePass(const ResolvedConfig& resolved, const RankContext& context,
                             const std::vector<pipeline::Action>& actions, const PassInput& input,
                             const LossWeighting& weighting, GptStage* stage,
                             std::vector<pipeline::TimedAction>* timeline);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_PIPELINE_PASS_H_
