#include "trainer/resolved_config.h"

#include <algorithm>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "data/training_data.h"
#include "trainer/config_validation.h"
#include "trainer/document_masking.h"

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
  r.world_size_ = world_size;
  r.tp_ = c.parallel().tensor_model_parallel_size();
  r.pp_ = c.parallel().pipeline_model_parallel_size();
  r.cp_ = c.parallel().context_parallel_size();
  r.dp_ = world_size / (r.tp_ * r.cp_ * r.pp_);  // validated: TP * CP * PP divides the world
  r.virtual_stages_ = std::max(1, c.parallel().num_virtual_stages_per_pipeline_rank());
  r.micro_batches_ = c.training().num_micro_batches();
  r.padded_vocab_size_ = PaddedVocabSize(c);

  ASSIGN_OR_RETURN(r.device_, Choice<DeviceKind>("--device", c.parallel().device()));
  ASSIGN_OR_RETURN(r.nan_policy_, Choice<NanPolicy>("--nan-policy", c.training().nan_policy()));
  ASSIGN_OR_RETURN(r.optimizer_, Choice<OptimizerKind>("--optimizer", c.optimizer().optimizer()));
  ASSIGN_OR_RETURN(r.lr_decay_style_,
                   Choice<LrDecayStyle>("--lr-decay-style", c.optimizer().lr_decay_style()));
  ASSIGN_OR_RETURN(r.position_embedding_type_,
                   Choice<PositionEmbeddingType>("--position-embedding-type",
                                                 c.model().position_embedding_type()));
  ASSIGN_OR_RETURN(r.normalization_,
                   Choice<Normalization>("--normalization", c.model().normalization()));
  ASSIGN_OR_RETURN(r.recompute_granularity_,
                   Choice<RecomputeGranularity>("--recompute-granularity",
                                                c.recompute().recompute_granularity()));
  ASSIGN_OR_RETURN(r.recompute_method_,
                   Choice<RecomputeMethod>("--recompute-method", c.recompute().recompute_method()));
  return r;
}

}  // namespace conveyor
