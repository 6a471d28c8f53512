// The model room's plain inputs, read from a validated config's fields: model/ never
// sees the flags proto (docs/design.md §1), so every reading of config.proto into
// ModelShape, MoeShape, RecomputePolicy and PipelineSplit happens here, once, when the
// config is resolved (trainer/config/resolved_config.h). The choice fields arrive parsed: the
// resolved config holds them as enums.
#ifndef CONVEYOR_TRAINER_CONFIG_MODEL_FROM_CONFIG_H_
#define CONVEYOR_TRAINER_CONFIG_MODEL_FROM_CONFIG_H_

#include <cstdint>
#include <vector>

#include "model/model_shape.h"
#include "model/moe_shape.h"
#include "model/pipeline_split.h"
#include "model/recompute.h"
#include "proto/config.pb.h"
#include "proto/config_choices.h"

namespace conveyor {

// The architecture of a resolved config; the padded vocabulary size depends on the
// tokenizer (ResolvedConfig::padded_vocab_size()).
ModelShape ModelShapeFromConfig(const ModelConfig& m, int64_t padded_vocab,
                                PositionEmbeddingType positions, Normalization normalization);

// The mixture of experts of a validated model config (dense when --num-experts is 0).
MoeShape MoeShapeFromConfig(const ModelConfig& m);

// --moe-router-load-balancing-type's types in the order given (not given: aux_loss, as
// Megatron's default).
std::vector<MoeLoadBalancingType> LoadBalancingTypes(const ModelConfig& m);
// The coefficient of one load-balancing type (Megatron's get_aux_loss_coeff): the
// --moe-aux-loss-coeff value at the type's place in the list, 0 for a type not listed or
// without a value.
float LoadBalancingCoeff(const ModelConfig& m, MoeLoadBalancingType type);

// The recomputation of a resolved config (--recompute-activations already folded into
// the granularity).
RecomputePolicy RecomputePolicyFromConfig(const RecomputeConfig& r,
                                          RecomputeGranularity granularity, RecomputeMethod method);

// The layer split's flags; validation reports LayersPerStage's errors for them.
PipelineSplit PipelineSplitFromConfig(const Config& config);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_CONFIG_MODEL_FROM_CONFIG_H_
