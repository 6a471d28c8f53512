#include "trainer/config/checkpoint_args.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "google/protobuf/text_format.h"
#include "trainer/checkpoint/checkpoint_reader.h"
#include "trainer/config/flags.h"

namespace conveyor {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

// A setting Megatron takes from the checkpoint: always (force), or only when the
// command line left it unset (load_args_from_checkpoint's _set_arg(name, force)).
struct Saved {
  const char* field;
  bool force;
};

// load_args_from_checkpoint's model settings that Conveyor has, in its order
// (add_bias_linear is disable_bias_linear here; padded_vocab_size follows vocab_size).
constexpr Saved kModel[] = {
    {"num_layers", false},
    {"hidden_size", false},
    {"ffn_hidden_size", false},
    {"seq_length", false},
    {"num_attention_heads", false},
    {"num_query_groups", true},
    {"group_query_attention", true},
    {"kv_channels", false},
    {"max_position_embeddings", false},
    {"position_embedding_type", true},
    {"rotary_base", true},
    {"rotary_percent", true},
    {"disable_bias_linear", true},
    {"add_qkv_bias", true},
    {"squared_relu", true},
    {"swiglu", true},
    {"untie_embeddings_and_output_weights", true},
    {"normalization", true},
    {"attention_dropout", true},
    {"hidden_dropout", true},
    {"num_experts", true},
    {"moe_layer_freq", true},
    {"moe_ffn_hidden_size", true},
    {"moe_router_topk", true},
    {"moe_token_dispatcher_type", false},
    {"moe_router_pre_softmax", true},
    {"moe_grouped_gemm", true},
    {"moe_shared_expert_intermediate_size", true},
    {"moe_router_score_function", true},
    {"moe_router_enable_expert_bias", true},
    {"moe_router_topk_scaling_factor", true},
    {"tiktoken_pattern", true},
    {"vocab_size", false},
};
constexpr Saved kTokenizer[] = {{"tokenizer_model", true}, {"tokenizer_type", true}};
constexpr Saved kModelParallel[] = {
    {"tensor_model_parallel_size", true},
    {"pipeline_model_parallel_size", true},
    {"num_virtual_stages_per_pipeline_rank", true},
    {"num_layers_per_virtual_pipeline_stage", false},
    {"expert_model_parallel_size", true},
};
// OptimizerParamScheduler's state: the peak and minimum rates, warmup and decay
// steps, decay style (WSD's anneal with it) and weight decay.
constexpr Saved kSchedule[] = {
    {"lr", true},
    {"min_lr", true},
    {"lr_warmup_iters", true},
    {"lr_warmup_samples", true},
    {"lr_warmup_fraction", true},
    {"lr_decay_iters", true},
    {"lr_decay_samples", true},
    {"lr_decay_style", true},
    {"lr_wsd_decay_style", true},
    {"lr_wsd_decay_iters", true},
    {"lr_wsd_decay_samples", true},
    {"weight_decay", true},
};

const FlagField* FieldNamed(const std::string& name) {
  for (const FlagField& f : AllFlagFields()) {
    if (f.field->name() == name) return &f;
  }
  return nullptr;
}

std::string ValueText(const Message& group, const FieldDescriptor* field) {
  std::string text;
  google::protobuf::TextFormat::PrintFieldValueToString(group, field, -1, &text);
  return text;
}

// Copies each of `settings` from `saved` into `config` (its value and whether it was
// set, so that a value derived when unset is derived again), naming the changes.
void Copy(absl::Span<const Saved> settings, const Config& saved, Config* config,
          std::vector<std::string>* changed) {
  for (const Saved& s : settings) {
    const FlagField* f = FieldNamed(s.field);
    if (f == nullptr) continue;  // a test checks every name
    Message* group = config->GetReflection()->MutableMessage(config, f->group);
    if (!s.force && group->GetReflection()->HasField(*group, f->field)) continue;
    std::unique_ptr<Message> from(saved.GetReflection()->GetMessage(saved, f->group).New());
    from->CopyFrom(saved.GetReflection()->GetMessage(saved, f->group));
    const std::string before = ValueText(*group, f->field);
    group->GetReflection()->SwapFields(group, from.get(), {f->field});
    const std::string after = ValueText(*group, f->field);
    if (after != before) changed->push_back(absl::StrCat(FlagName(*f->field), " ", after));
  }
}

}  // namespace

void ApplySavedSettings(const Config& saved, Config* config, std::ostream& log) {
  const CheckpointConfig c = config->checkpoint();
  if (c.use_checkpoint_args()) {
    std::vector<std::string> changed;
    Copy(kModel, saved, config, &changed);
    if (!c.no_use_tokenizer_model_from_checkpoint_args()) Copy(kTokenizer, saved, config, &changed);
    if (c.use_mp_args_from_checkpoint_args()) Copy(kModelParallel, saved, config, &changed);
    log << "conveyor: --use-checkpoint-args: "
        << (changed.empty() ? "the checkpoint's model settings are the command line's"
                            : absl::StrCat("from the checkpoint ", absl::StrJoin(changed, ", ")))
        << "\n";
  }
  if (c.use_checkpoint_opt_param_scheduler()) {
    std::vector<std::string> changed;
    Copy(kSchedule, saved, config, &changed);
    // Megatron's scheduler stores its decay steps, which default to the saving run's
    // length: a run of another --train-iters decays over the saved one's.
    OptimizerConfig& opt = *config->mutable_optimizer();
    if (opt.lr_decay_iters() == 0 && opt.lr_decay_samples() == 0) {
      const TrainingConfig& t = saved.training();
      if (t.train_samples() > 0) {
        opt.set_lr_decay_samples(t.train_samples());
        changed.push_back(absl::StrCat("--lr-decay-samples ", t.train_samples()));
      } else {
        opt.set_lr_decay_iters(t.train_iters());
        changed.push_back(absl::StrCat("--lr-decay-iters ", t.train_iters()));
      }
    }
    log << "conveyor: --use-checkpoint-opt_param-scheduler: from the checkpoint "
        << absl::StrJoin(changed, ", ") << "\n";
  }
}

absl::Status ApplyCheckpointArgs(Config* config, std::ostream& log) {
  const CheckpointConfig& c = config->checkpoint();
  if (!c.use_checkpoint_args() && !c.use_checkpoint_opt_param_scheduler()) {
    return absl::OkStatus();
  }
  const auto named = [&c](const absl::Status& s) {
    return absl::Status(s.code(), absl::StrCat("--load ", c.load(), ": ", s.message()));
  };
  if (c.load().empty()) {
    log << "conveyor: --use-checkpoint-*: no --load, the command line's settings are used\n";
    return absl::OkStatus();
  }
  const absl::StatusOr<CheckpointFolderSurvey> survey = SurveyCheckpointFolder(c.load());
  if (!survey.ok()) return named(survey.status());
  if (survey->holds_no_checkpoint()) {
    log << "conveyor: --use-checkpoint-*: --load " << c.load()
        << " holds no checkpoint, the command line's settings are used\n";
    return absl::OkStatus();
  }
  const absl::StatusOr<LoadedCheckpoint> checkpoint = OpenCheckpoint(
      c.load(), c.ckpt_step() > 0 ? std::optional<int64_t>(c.ckpt_step()) : std::nullopt);
  if (!checkpoint.ok()) return named(checkpoint.status());
  ApplySavedSettings(checkpoint->State(0).config, config, log);
  return absl::OkStatus();
}

}  // namespace conveyor
