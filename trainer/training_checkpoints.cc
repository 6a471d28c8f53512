#include "trainer/training_checkpoints.h"

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/text_format.h"
#include "runtime/status_macros.h"
#include "trainer/checkpoint/checkpoint_reader.h"
#include "trainer/checkpoint/checkpoint_writer.h"
#include "trainer/checkpoint/index_runs.h"
#include "trainer/checkpoint/sharding_runs.h"
#include "trainer/hf/export.h"

namespace conveyor {

TrainingCheckpoints::TrainingCheckpoints(const Config& config, GptStage* stage,
                                         ParameterUpdater* updater, const CheckpointPlace& place)
    : config_(config), stage_(stage), updater_(updater), place_(place) {
  if (config.checkpoint().async_save() && !config.checkpoint().save().empty()) {
    async_ = std::make_unique<AsyncCheckpointSaver>(config.checkpoint().save());
  }
}

bool TrainingCheckpoints::Writes(const Parameter& p) const {
  if (&p == stage_->TiedCopyInHead()) return false;
  return !p.sharding.replicated() || place_.tp_rank == 0;
}

std::vector<TensorShardRef> TrainingCheckpoints::Tensors(bool saving, HostStaging* staging) {
  const CheckpointConfig& c = config_.checkpoint();
  std::vector<TensorShardRef> refs;
  for (Parameter* p : stage_->parameters()) {
    if (!saving || (place_.dp_rank == 0 && Writes(*p))) {
      refs.push_back(ShardRefFor(*p, p->name, staging->HostData(&p->value, saving)));
    }
  }
  const bool optimizer = saving ? !c.no_save_optim() : !(c.no_load_optim() || c.finetune());
  if (!optimizer) return refs;
  // The replicated optimizer's state is the same on every DP rank: rank 0 writes it.
  // The distributed optimizer's is sharded over DP: every rank writes its slice.
  const bool dp_shards = config_.parallel().use_distributed_optimizer();
  Optimizer& opt = updater_->optimizer();
  for (size_t i = 0; i < opt.segments().size(); ++i) {
    const OptimizerSegment& s = opt.segments()[i];
    if (saving && (!Writes(*s.owner) || (!dp_shards && place_.dp_rank != 0))) continue;
    const std::vector<IndexRun> runs = SliceRuns(
        RunsForSharding(s.owner->global_shape, s.owner->sharding), s.offset, s.offset + s.n);
    refs.push_back({"optimizer.exp_avg/" + s.owner->name, s.owner->global_shape, runs,
                    staging->HostData(&opt.exp_avg(i), saving), s.n});
    if (!opt.exp_avg_sq(i).empty()) {
      refs.push_back({"optimizer.exp_avg_sq/" + s.owner->name, s.owner->global_shape, runs,
                      staging->HostData(&opt.exp_avg_sq(i), saving), s.n});
    }
  }
  return refs;
}

absl::Status TrainingCheckpoints::CheckSameModel(const Config& saved,
                                                 const std::string& directory) const {
  // The settings that decide the parameters' shapes and meaning; dropout, init and
  // sequence length may change between runs.
  static constexpr const char* kShapeFields[] = {"num_layers",
                                                 "hidden_size",
                                                 "ffn_hidden_size",
                                                 "num_attention_heads",
                                                 "num_query_groups",
                                                 "kv_channels",
                                                 "max_position_embeddings",
                                                 "position_embedding_type",
                                                 "normalization",
                                                 "swiglu",
                                                 "untie_embeddings_and_output_weights",
                                                 "disable_bias_linear",
                                                 "vocab_size"};
  const google::protobuf::Descriptor* d = ModelConfig::descriptor();
  std::vector<std::string> differences;
  for (const char* name : kShapeFields) {
    const google::protobuf::FieldDescriptor* f = d->FindFieldByName(name);
    std::string was, now;
    google::protobuf::TextFormat::PrintFieldValueToString(saved.model(), f, -1, &was);
    google::protobuf::TextFormat::PrintFieldValueToString(config_.model(), f, -1, &now);
    if (was != now) {
      std::string flag = name;
      for (char& c : flag) c = c == '_' ? '-' : c;
      differences.push_back(absl::StrFormat("--%s %s (checkpoint: %s)", flag, now, was));
    }
  }
  if (differences.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrFormat(
      "--load %s holds a different model: %s; use the checkpoint's values (they are in its "
      "manifest) or start without --load",
      directory, absl::StrJoin(differences, ", ")));
}

absl::Status TrainingCheckpoints::LoadHuggingFace(std::ostream* log) {
  const std::string& dir = config_.checkpoint().load_hf();
  ASSIGN_OR_RETURN(const GlobalTensorMap tensors, ReadHfGpt2(dir, config_));
  HostStaging staging;
  for (Parameter* p : stage_->parameters()) {
    auto it = tensors.find(p->name);
    if (it == tensors.end()) {
      return absl::NotFoundError(absl::StrFormat("--load-hf %s: no tensor for %s", dir, p->name));
    }
    const std::vector<int64_t> global = GlobalIndices(*p);
    float* value = staging.HostData(&p->value, /*download=*/false);
    for (size_t i = 0; i < global.size(); ++i) value[i] = it->second[global[i]];
  }
  staging.Upload();
  updater_->ParametersLoaded();
  if (log != nullptr) *log << "conveyor: loaded Hugging Face GPT-2 weights from " << dir << "\n";
  return absl::OkStatus();
}

absl::StatusOr<ResumePoint> TrainingCheckpoints::Load(std::ostream* log) {
  const CheckpointConfig& c = config_.checkpoint();
  if (c.load().empty()) {
    if (!c.load_hf().empty()) RETURN_IF_ERROR(LoadHuggingFace(log));
    return ResumePoint{};
  }
  const std::optional<int64_t> step =
      c.ckpt_step() > 0 ? std::optional<int64_t>(c.ckpt_step()) : std::nullopt;
  absl::StatusOr<LoadedCheckpoint> checkpoint = OpenCheckpoint(c.load(), step);
  if (absl::IsNotFound(checkpoint.status()) && !step.has_value()) {
    // Megatron's behaviour: a --load folder without a checkpoint starts from scratch,
    // so the same command can start a job and resume it.
    if (log != nullptr) {
      *log << "conveyor: no checkpoint in --load " << c.load() << " ("
           << checkpoint.status().message() << "); starting from iteration 0\n";
    }
    if (!c.load_hf().empty()) RETURN_IF_ERROR(LoadHuggingFace(log));
    return ResumePoint{};
  }
  if (!checkpoint.ok()) return checkpoint.status();
  RETURN_IF_ERROR(CheckSameModel(checkpoint->State(0).config, checkpoint->directory()));
  HostStaging staging;
  RETURN_IF_ERROR(LoadTensors(*checkpoint, Tensors(/*saving=*/false, &staging)));
  staging.Upload();
  updater_->ParametersLoaded();
  const CheckpointState state = checkpoint->State(place_.world->rank());
  if (!(c.no_load_optim() || c.finetune())) {
    updater_->optimizer().set_steps(state.optimizer_steps);
  }
  if (log != nullptr) {
    *log << absl::StrFormat("conveyor: loaded %s (iteration %d)%s\n", checkpoint->directory(),
                            state.iteration, c.finetune() ? ", --finetune: from iteration 0" : "");
  }
  if (c.finetune()) return ResumePoint{};
  return ResumePoint{state.iteration, state.consumed_samples};
}

absl::Status TrainingCheckpoints::Save(const ResumePoint& point) {
  CheckpointState state;
  state.config = config_;
  state.iteration = point.iteration;
  state.consumed_samples = point.consumed_samples;
  state.data_position.set_train_consumed_samples(point.consumed_samples);
  state.layout.set_tensor_model_parallel_size(place_.tp_size);
  state.layout.set_pipeline_model_parallel_size(place_.pp_size);
  state.layout.set_data_parallel_size(place_.dp_size);
  state.layout.set_world_size(place_.world->size());
  state.layout.set_virtual_pipeline_stages(stage_->num_chunks());
  state.layout.set_use_distributed_optimizer(config_.parallel().use_distributed_optimizer());
  state.optimizer_steps = updater_->optimizer().steps();
  HostStaging staging;  // the writers copy or write what they need before returning
  const std::vector<TensorShardRef> tensors = Tensors(/*saving=*/true, &staging);
  if (async_ != nullptr) return async_->Start(state, tensors, *place_.world);
  return SaveCheckpoint(config_.checkpoint().save(), state, tensors, *place_.world);
}

absl::Status TrainingCheckpoints::Finish() {
  return async_ != nullptr ? async_->Finish(*place_.world) : absl::OkStatus();
}

}  // namespace conveyor
