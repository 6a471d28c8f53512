#include "trainer/config/resolved_config.h"

#include <algorithm>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "data/training_data.h"
#include "trainer/config/config_validation.h"
#include "trainer/config/document_masking.h"
#include "trainer/config/model_from_config.h"

namespace conveyor {
namespace {

// ResolveConfig has checked every choice; an unknown one here is a bug.
template <typename Enum>
absl::StatusOr<Enum> Choice(const char* flag, const std::string& text) {
  const std::optional<Enum> value = ParseChoice<Enum>(text);
  if (!value.has_value()) {
    return absl::InternalError(absl::StrCat(flag, " '", text, "' has no enum value"));
  }
  return *value;
}

}  // namespace

absl::StatusOr<ResolvedConfig> ResolvedConfig::Resolve(const Config& config, int world_size) {
  ResolvedConfig r;
  ASSIGN_OR_RETURN(r.config_, ResolveConfig(config, world_size));
  // A tokenizer fixes the vocabulary (--vocab-size only sizes mock and null-tokenized
  // data): from here on the config's --vocab-size is the one the model and the data use.
  ASSIGN_OR_RETURN(const std::unique_ptr<Tokenizer> tokenizer, ResolveVocabulary(&r.config_));
  RETURN_IF_ERROR(ResolveEodToken(tokenizer.get(), &r.config_));

  const Config& c = r.config_;
  const ParallelConfig& p = c.parallel();
  ParallelSizes& l = r.layout_;
  l.tp = p.tensor_model_parallel_size();
  l.pp = p.pipeline_model_parallel_size();
  l.cp = p.context_parallel_size();
  l.dp = world_size / (l.tp * l.cp * l.pp);  // validated: TP * CP * PP divides the world
  l.ep = std::max(1, p.expert_model_parallel_size());
  l.etp = p.expert_tensor_parallel_size() > 0 ? p.expert_tensor_parallel_size() : l.tp;
  r.virtual_stages_ = std::max(1, p.num_virtual_stages_per_pipeline_rank());
  r.micro_batches_ = c.training().num_micro_batches();
  r.padded_vocab_size_ = PaddedVocabSize(c);
  ASSIGN_OR_RETURN(r.layers_per_stage_, LayersPerStage(PipelineSplitFromConfig(c)));
  RETURN_IF_ERROR(r.ParseChoices());
  r.model_shape_ = ModelShapeFromConfig(c.model(), r.padded_vocab_size_, r.position_embedding_type_,
                                        r.normalization_);
  r.recompute_policy_ =
      RecomputePolicyFromConfig(c.recompute(), r.recompute_granularity_, r.recompute_method_);
  return r;
}

absl::Status ResolvedConfig::ParseChoices() {
  const Config& c = config_;
  ASSIGN_OR_RETURN(device_, Choice<DeviceKind>("--device", c.parallel().device()));
  ASSIGN_OR_RETURN(nan_policy_, Choice<NanPolicy>("--nan-policy", c.training().nan_policy()));
  ASSIGN_OR_RETURN(optimizer_, Choice<OptimizerKind>("--optimizer", c.optimizer().optimizer()));
  ASSIGN_OR_RETURN(lr_decay_style_,
                   Choice<LrDecayStyle>("--lr-decay-style", c.optimizer().lr_decay_style()));
  ASSIGN_OR_RETURN(position_embedding_type_,
                   Choice<PositionEmbeddingType>("--position-embedding-type",
                                                 c.model().position_embedding_type()));
  ASSIGN_OR_RETURN(normalization_,
                   Choice<Normalization>("--normalization", c.model().normalization()));
  ASSIGN_OR_RETURN(recompute_granularity_,
                   Choice<RecomputeGranularity>("--recompute-granularity",
                                                c.recompute().recompute_granularity()));
  ASSIGN_OR_RETURN(recompute_method_,
                   Choice<RecomputeMethod>("--recompute-method", c.recompute().recompute_method()));
  return absl::OkStatus();
}

MemoryInputs MemoryInputsOf(const ResolvedConfig& resolved) {
  const Config& c = resolved.config();
  MemoryInputs in;
  in.layout = resolved.layout();
  in.virtual_stages = resolved.virtual_stages();
  in.sequence_parallel = c.parallel().sequence_parallel();
  in.layers_per_stage = resolved.layers_per_stage();
  in.pipeline_schedule = c.parallel().pipeline_schedule();
  in.micro_batch_size = c.training().micro_batch_size();
  in.num_micro_batches = resolved.micro_batches();
  in.bf16 = c.precision().bf16();
  in.adam = resolved.optimizer() == OptimizerKind::kAdam;
  in.distributed_optimizer = c.parallel().use_distributed_optimizer();
  in.grad_reduce_in_bf16 = c.parallel().grad_reduce_in_bf16();
  in.ddp_bucket_size = c.parallel().ddp_bucket_size();
  in.recompute = resolved.recompute_policy();
  return in;
}

}  // namespace conveyor
