// The step's end for auxiliary-loss-free balancing (--moe-router-enable-expert-bias; see
// model/expert_bias.h), Megatron's _update_router_expert_bias: every MoE layer's token
// counts of the step, summed over the data-parallel (x context-parallel) ranks, move its
// expert bias. Tensor-parallel ranks are not summed: here each routes all the
// micro-batch's tokens alike (Megatron sums over TP because there each routes its
// sequence-parallel shard). A TP sum would count every token TP times, which the sign
// rule would not see (it scales every count alike); skipping it saves a collective.
#ifndef CONVEYOR_TRAINER_OPTIMIZATION_EXPERT_BIAS_UPDATE_H_
#define CONVEYOR_TRAINER_OPTIMIZATION_EXPERT_BIAS_UPDATE_H_

#include <vector>

#include "absl/status/status.h"
#include "model/expert_bias.h"
#include "model/gpt_stage.h"
#include "model/moe_shape.h"
#include "trainer/rank_context.h"

namespace conveyor {

// The expert biases of the stage's MoE layers (every model chunk), in layer order per
// chunk; empty without --moe-router-enable-expert-bias.
std::vector<ExpertBias*> StageExpertBiases(GptStage* stage);

// After a step: with `step_applied` (the optimizer stepped), each layer's bias moves by
// the step's counts summed over the DP x CP ranks; after a skipped step (NaN) the counts
// are dropped and the biases stay. Collective over dp_cp when the step applied.
absl::Status FinishExpertBiasStep(GptStage* stage, const MoeShape& moe, bool step_applied,
                                  const RankContext& context);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_OPTIMIZATION_EXPERT_BIAS_UPDATE_H_
