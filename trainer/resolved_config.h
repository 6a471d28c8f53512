// A Config resolved once for the run (docs/design.md §1): ResolveConfig's derived
// values filled in and the vocabulary fixed by the tokenizer, with the sizes the run
// derives from it and the choice fields as enums. Functions that need a resolved
// config take `const ResolvedConfig&`, so an unresolved one cannot reach them.
#ifndef CONVEYOR_TRAINER_RESOLVED_CONFIG_H_
#define CONVEYOR_TRAINER_RESOLVED_CONFIG_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "proto/config.pb.h"
#include "proto/config_choices.h"

namespace conveyor {

class ResolvedConfig {
 public:
  // The one resolution of a config for `world_size` ranks: ResolveConfig (validation
  // and derived values, trainer/config_validation.h), then the tokenizer's vocabulary
  // (ResolveVocabulary, data/training_data.h). A resolved config resolves to itself.
  // Returns InvalidArgumentError listing every problem, or the tokenizer's error.
  static absl::StatusOr<ResolvedConfig> Resolve(const Config& config, int world_size);

  // The resolved proto: what is printed, compared across ranks and stored in
  // checkpoint manifests, and what code reads plain fields from.
  const Config& config() const { return config_; }

  // Derived sizes. world = TP * CP * PP * DP.
  int world_size() const { return world_size_; }
  int tp() const { return tp_; }
  int pp() const { return pp_; }
  int cp() const { return cp_; }
  int dp() const { return dp_; }
  int virtual_stages() const { return virtual_stages_; }  // V, chunks per pipeline rank
  int micro_batches() const { return micro_batches_; }    // M per step on each DP rank
  int64_t padded_vocab_size() const { return padded_vocab_size_; }

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

  Config config_;
  int world_size_ = 1, tp_ = 1, pp_ = 1, cp_ = 1, dp_ = 1, virtual_stages_ = 1, micro_batches_ = 1;
  int64_t padded_vocab_size_ = 0;
  DeviceKind device_ = DeviceKind::kAuto;
  NanPolicy nan_policy_ = NanPolicy::kStop;
  OptimizerKind optimizer_ = OptimizerKind::kAdam;
  LrDecayStyle lr_decay_style_ = LrDecayStyle::kLinear;
  PositionEmbeddingType position_embedding_type_ = PositionEmbeddingType::kLearnedAbsolute;
  Normalization normalization_ = Normalization::kLayerNorm;
  RecomputeGranularity recompute_granularity_ = RecomputeGranularity::kNone;
  RecomputeMethod recompute_method_ = RecomputeMethod::kNone;
};

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_RESOLVED_CONFIG_H_
