// A step's mixture-of-experts figures over every rank, as Megatron logs them: the
// load-balancing and z losses (without their coefficients) averaged over the MoE layers,
// the micro-batches and the data-parallel ranks, plus the experts' load: the fewest and
// most tokens any expert of any MoE layer received in the step (summed over micro-batches
// and data- and context-parallel ranks) and the routing slots dropped over capacity.
#ifndef CONVEYOR_TRAINER_REPORTING_MOE_METRICS_H_
#define CONVEYOR_TRAINER_REPORTING_MOE_METRICS_H_

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "model/gpt_stage.h"
#include "model/moe_shape.h"
#include "proto/config_choices.h"
#include "trainer/rank_context.h"
#include "trainer/reporting/training_log.h"

namespace conveyor {

// Takes the step's metrics from the stage's MoE layers and sums them over the pipeline
// and data-parallel ranks (every rank calls it); nullopt for a dense model. `num_layers`
// and `moe` count the multi-token prediction depths' layers after the model's
// (MtpLayerShape), as Megatron's MoE figures do.
// `types` are --moe-router-load-balancing-type's (trainer/config/model_from_config.h),
// whose losses are logged.
absl::StatusOr<std::optional<MoeStepFigures>> GatherMoeStepFigures(
    GptStage* stage, const MoeShape& moe, absl::Span<const MoeLoadBalancingType> types,
    int64_t num_layers, const RankContext& context);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_REPORTING_MOE_METRICS_H_
