// A Config resolved once for the run (docs/design.md §1): ResolveConfig's derived
// values filled in and the vocabulary fixed by the tokenizer, with the sizes the run
// derives from it, the choice fields as enums and the model room's plain inputs (the
// model's shape, its recomputation and layer split). Functions that need a resolved
// config take `const ResolvedConfig&`, so an unresolved one cannot reach them.
#ifndef CONVEYOR_TRAINER_CONFIG_RESOLVED_CONFIG_H_
#define CONVEYOR_TRAINER_CONFIG_RESOLVED_CONFIG_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "model/memory_model.h"
#include "model/model_shape.h"
#include "model/recompute.h"
#include "parallel/rank_layout.h"
#include "proto/config.pb.h"
#include "proto/config_choices.h"

namespace conveyor {

class ResolvedConfig {
 public:
  // The one resolution of a config for `world_size` ranks: ResolveConfig (validation
  // and derived values, trainer/config/config_validation.h), then the tokenizer's vocabulary
  // (ResolveVocabulary, data/training_data.h). A resolved config resolves to itself.
  // Returns InvalidArgumentError listing every problem, or the tokenizer's error.
  static absl::StatusOr<ResolvedConfig> Resolve(const Config& config, int world_size);

  // The resolved proto: what is printed, compared across ranks and stored in
  // checkpoint manifests, and what code reads plain fields from.
  const Config& config() const { return config_; }

  // Derived sizes. world = TP * CP * PP * DP; the experts re-divide a stage's ranks into
  // ETP x EP x expert DP (parallel/rank_layout.h).
  const ParallelSizes& layout() const { return layout_; }
  int world_size() const { return layout_.world(); }
  int tp() const { return layout_.tp; }
  int pp() const { return layout_.pp; }
  int cp() const { return layout_.cp; }
  int dp() const { return layout_.dp; }
  int ep() const { return layout_.ep; }
  int etp() const { return layout_.etp; }  // --expert-tensor-parallel-size, 0 resolved to TP
  int expert_dp() const { return layout_.expert_dp(); }
  int virtual_stages() const { return virtual_stages_; }  // V, chunks per pipeline rank
  int micro_batches() const { return micro_batches_; }    // M per step on each DP rank
  int64_t padded_vocab_size() const { return padded_vocab_size_; }
  // Transformer layers of each global stage (P x V of them, model/pipeline_split.h).
  const std::vector<int64_t>& layers_per_stage() const { return layers_per_stage_; }

  // The model room's inputs (trainer/config/model_from_config.h).
  const ModelShape& model_shape() const { return model_shape_; }
  const RecomputePolicy& recompute_policy() const { return recompute_policy_; }

  // The choice fields code branches on (proto/config_choices.h).
  DeviceKind device() const { return device_; }
  bool on_gpu() const { return device_ == DeviceKind::kCuda; }
  NanPolicy nan_policy() const { return nan_policy_; }
  OptimizerKind optimizer() const { return optimizer_; }
  LrDecayStyle lr_decay_style() const { return lr_decay_style_; }
  PositionEmbeddingType position_embedding_type() const { return position_embedding_type_; }
  Normalization normalization() const { return normalization_; }
  RecomputeGranularity recompute_granularity() const { return recompute_granularity_; }
  RecomputeMethod recompute_method() const { return recompute_method_; }

 private:
  ResolvedConfig() = default;

  // The choice fields, parsed (ResolveConfig has checked each).
  absl::Status ParseChoices();

  Config config_;
  ParallelSizes layout_;
  int virtual_stages_ = 1, micro_batches_ = 1;
  int64_t padded_vocab_size_ = 0;
  std::vector<int64_t> layers_per_stage_;
  ModelShape model_shape_;
  RecomputePolicy recompute_policy_;
  DeviceKind device_ = DeviceKind::kAuto;
  NanPolicy nan_policy_ = NanPolicy::kStop;
  OptimizerKind optimizer_ = OptimizerKind::kAdam;
  LrDecayStyle lr_decay_style_ = LrDecayStyle::kLinear;
  PositionEmbeddingType position_embedding_type_ = PositionEmbeddingType::kLearnedAbsolute;
  Normalization normalization_ = Normalization::kLayerNorm;
  RecomputeGranularity recompute_granularity_ = RecomputeGranularity::kNone;
  RecomputeMethod recompute_method_ = RecomputeMethod::kNone;
};

// What the memory model (model/memory_model.h) reads of the run.
MemoryInputs MemoryInputsOf(const ResolvedConfig& resolved);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_CONFIG_RESOLVED_CONFIG_H_
