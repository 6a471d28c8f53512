#include "trainer/training_checkpoints.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "google/protobuf/text_format.h"
#include "trainer/checkpoint/checkpoint_reader.h"
#include "trainer/checkpoint/checkpoint_writer.h"
#include "trainer/checkpoint/file_io.h"
#include "trainer/checkpoint/format.h"
#include "trainer/checkpoint/index_runs.h"
#include "trainer/checkpoint/sharding_runs.h"
#include "trainer/hf/export.h"
#include "trainer/optimization/expert_bias_update.h"

namespace conveyor {
namespace {

constexpr char kWordEmbeddings[] = "embedding.word_embeddings.weight";
constexpr char kOptimizerPrefix[] = "optimizer.";

// Megatron's vocabulary padding: `vocab` rounded up to a multiple of `multiple`.
int64_t PadVocab(int64_t vocab, int64_t multiple) {
  if (vocab <= 0 || multiple <= 0) return vocab;
  return (vocab + multiple - 1) / multiple * multiple;
}

// A --make-vocab-size-divisible-by, and whether it pads alike under another TP.
struct PaddingDivisor {
  int64_t divisor = 0;
  bool fits_other_tp = false;
};

// The smallest --make-vocab-size-divisible-by that pads `vocab` to `rows` under `tp`
// and under `other_tp` too (one value for both layouts), else the smallest that does
// under `tp`; nullopt when none does. With 0 < vocab <= rows that is exactly when
// rows is not a multiple of tp, as rows / tp always fits then.
std::optional<PaddingDivisor> DivisorForPaddedVocab(int64_t vocab, int64_t rows, int64_t tp,
                                                    int64_t other_tp) {
  if (vocab <= 0 || rows < vocab || tp <= 0) return std::nullopt;
  std::optional<PaddingDivisor> first;
  for (int64_t d = 1; d * tp <= rows; ++d) {
    if (PadVocab(vocab, d * tp) != rows) continue;
    if (PadVocab(vocab, d * other_tp) == rows) return PaddingDivisor{d, true};
    if (!first.has_value()) first = PaddingDivisor{d, false};
  }
  return first;
}

}  // namespace

TrainingCheckpoints::TrainingCheckpoints(const ResolvedConfig& config, const RankContext& context,
                                         GptStage* stage, ParameterUpdater* updater)
    : config_(config.config()), stage_(stage), updater_(updater), context_(context) {
  if (config_.checkpoint().async_save() && !config_.checkpoint().save().empty()) {
    async_ = std::make_unique<AsyncCheckpointSaver>(config_.checkpoint().save(), OwnershipGuard());
  }
}

CommitGuard TrainingCheckpoints::OwnershipGuard() const {
  // Only rank 0 commits, and it holds the lock from Load on.
  return [this] { return save_lock_.has_value() ? save_lock_->VerifyOwnership() : absl::OkStatus(); };
}

bool TrainingCheckpoints::Writes(const Parameter& p) const {
  if (&p == stage_->TiedCopyInHead()) return false;
  return !p.sharding.replicated() || context_.tp_rank() == 0;
}

std::vector<TrainingCheckpoints::LocalValues> TrainingCheckpoints::ValuesOfParameters(
    HostStaging* staging, bool saving) {
  std::vector<LocalValues> out;
  for (Parameter* p : stage_->parameters()) {
    if (p->value.empty()) continue;  // in the optimizer's master shard: below
    out.push_back({p, 0, p->local_numel(), staging->HostData(&p->value, saving), false});
  }
  for (ParameterUpdater::MasterPiece& piece : updater_->MasterPieces()) {
    out.push_back({piece.owner, piece.offset, piece.values.numel(),
                   staging->HostData(&piece.values, saving), true});
  }
  return out;
}

std::vector<TensorShardRef> TrainingCheckpoints::Tensors(bool saving, HostStaging* staging) {
  const CheckpointConfig& c = config_.checkpoint();
  std::vector<TensorShardRef> refs;
  for (LocalValues& values : ValuesOfParameters(staging, saving)) {
    // A replicated value is written by rank 0 of the ranks holding it (an expert's by
    // its expert-data-parallel rank 0: every expert once).
    if (saving && (!Writes(*values.owner) ||
                   (!values.sharded_over_dp && context_.replicas(*values.owner).rank() != 0))) {
      continue;
    }
    const Parameter& p = *values.owner;
    refs.push_back({p.name, p.global_shape,
                    SliceRuns(RunsForSharding(p.global_shape, p.sharding), values.offset,
                              values.offset + values.n),
                    values.data, values.n});
  }
  // --moe-router-enable-expert-bias: each MoE layer's bias, state that is not a parameter,
  // the same on every TP and DP rank (host fp32): written once, loaded by every rank.
  const bool writes_replicas = context_.tp_rank() == 0 && context_.dp_cp().rank() == 0;
  for (ExpertBias* bias : StageExpertBiases(stage_)) {
    if (saving && !writes_replicas) break;
    const auto n = static_cast<int64_t>(bias->values().size());
    refs.push_back({bias->name(), {n}, {IndexRun{0, n}}, bias->mutable_values(), n});
  }
  const bool optimizer = saving ? !c.no_save_optim() : !(c.no_load_optim() || c.finetune());
  if (!optimizer) return refs;
  // The replicated optimizer's state is the same on every DP rank: rank 0 writes it.
  // The distributed optimizer's is sharded over DP: every rank writes its slice.
  const bool dp_shards = config_.parallel().use_distributed_optimizer();
  Optimizer& opt = updater_->optimizer();
  for (size_t i = 0; i < opt.segments().size(); ++i) {
    const OptimizerSegment& s = opt.segments()[i];
    if (saving && (!Writes(*s.owner) || (!dp_shards && context_.replicas(*s.owner).rank() != 0))) {
      continue;
    }
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
                                                 "add_qkv_bias",
                                                 "qk_layernorm",
                                                 "rotary_percent",
                                                 "multi_latent_attention",
                                                 "q_lora_rank",
                                                 "kv_lora_rank",
                                                 "qk_head_dim",
                                                 "qk_pos_emb_head_dim",
                                                 "v_head_dim",
                                                 "vocab_size",
                                                 "num_experts",
                                                 "moe_ffn_hidden_size",
                                                 "moe_layer_freq",
                                                 "moe_shared_expert_intermediate_size",
                                                 // state a checkpoint without it lacks
                                                 "moe_router_enable_expert_bias"};
  const google::protobuf::Descriptor* d = ModelConfig::descriptor();
  std::vector<std::string> differences;
  for (const char* name : kShapeFields) {
    const google::protobuf::FieldDescriptor* f = d->FindFieldByName(name);
    std::string was, now;
    google::protobuf::TextFormat::PrintFieldValueToString(saved.model(), f, -1, &was);
    google::protobuf::TextFormat::PrintFieldValueToString(config_.model(), f, -1, &now);
    // YaRN is RoPE with rescaled frequencies and no parameters of its own: a run may
    // extend a RoPE checkpoint's context with it, as with --rotary-base or
    // --use-rope-scaling (which, like --window-size, may change between runs).
    const auto rope_kind = [](const std::string& v) { return v == "\"yarn\"" ? "\"rope\"" : v; };
    if (was != now && (std::string(name) != "position_embedding_type" ||
                       rope_kind(was) != rope_kind(now))) {
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
  // This rank reads only what it keeps: its stage's tensors, and of each its TP slice.
  HfElementRequest request;
  for (const Parameter* p : stage_->parameters()) request[p->name] = GlobalIndices(*p);
  // DeepSeek-V3's e_score_correction_bias: each MoE layer's expert bias, whole on every rank.
  for (const ExpertBias* bias : StageExpertBiases(stage_)) {
    std::vector<int64_t>& all = request[bias->name()];
    all.resize(bias->values().size());
    std::iota(all.begin(), all.end(), int64_t{0});
  }
  int64_t bytes_read = 0;
  ASSIGN_OR_RETURN(const HfElementValues local, ReadHfSlices(dir, config_, request, &bytes_read));
  for (ExpertBias* bias : StageExpertBiases(stage_)) {
    const std::vector<float>& values = local.at(bias->name());
    std::copy(values.begin(), values.end(), bias->mutable_values());
  }
  HostStaging staging;
  for (const LocalValues& values : ValuesOfParameters(&staging, /*saving=*/false)) {
    const std::vector<float>& source = local.at(values.owner->name);  // in local order
    std::copy(source.begin() + values.offset, source.begin() + values.offset + values.n,
              values.data);
  }
  staging.Upload();
  if (log != nullptr) {
    *log << "conveyor: loaded Hugging Face weights from " << dir << " (this rank read "
         << bytes_read << " bytes of tensor data)\n";
  }
  return absl::OkStatus();
}

absl::StatusOr<ResumePoint> TrainingCheckpoints::Load(std::ostream* log) {
  // First, so that no other run changes --save (which may be --load) from here on.
  RETURN_IF_ERROR(AgreeAcrossRanks(context_.world(), LockSaveFolder(log), "lock --save"));
  const absl::StatusOr<LoadOutcome> outcome = LoadHere(log);
  // Each rank read --load on its own; ranks that loaded different checkpoints would
  // train apart without a word. A failed or disagreeing load has touched nothing, and
  // must not: the --save probe comes after the agreement.
  const absl::StatusOr<LoadedCheckpointId> loaded =
      outcome.ok() ? absl::StatusOr<LoadedCheckpointId>(outcome->loaded) : outcome.status();
  RETURN_IF_ERROR(AgreeOnLoadedCheckpoint(context_.world(), loaded, config_.checkpoint().load()));
  // Every rank loaded: the copies of the parameters follow (a collective).
  RETURN_IF_ERROR(updater_->ParametersLoaded());
  RETURN_IF_ERROR(AgreeAcrossRanks(context_.world(), PrepareSaveFolder(outcome->loaded, log),
                                   "prepare --save"));
  return outcome->resume;
}

absl::StatusOr<TrainingCheckpoints::LoadOutcome> TrainingCheckpoints::LoadHere(std::ostream* log) {
  const CheckpointConfig& c = config_.checkpoint();
  if (c.load().empty()) {
    if (!c.load_hf().empty()) RETURN_IF_ERROR(LoadHuggingFace(log));
    return LoadOutcome{};
  }
  absl::StatusOr<CheckpointFolderSurvey> survey = SurveyCheckpointFolder(c.load());
  if (!survey.ok()) {
    return absl::Status(survey.status().code(),
                        absl::StrCat("--load ", c.load(), ": ", survey.status().message()));
  }
  if (survey->holds_no_checkpoint()) {
    RETURN_IF_ERROR(StartWithoutCheckpoint(*survey, log));
    return LoadOutcome{};
  }
  ASSIGN_OR_RETURN(const int64_t iteration, ChooseIteration(*survey));
  // Without --ckpt-step, OpenCheckpoint reads the latest file again, so that its
  // messages say when that file names a missing iteration.
  absl::StatusOr<LoadedCheckpoint> checkpoint = OpenCheckpoint(
      c.load(), c.ckpt_step() > 0 ? std::optional<int64_t>(iteration) : std::nullopt);
  if (!checkpoint.ok()) return Unloadable(checkpoint.status(), *survey, iteration);
  RETURN_IF_ERROR(CheckSameModel(checkpoint->State(0).config, checkpoint->directory()));
  RETURN_IF_ERROR(CheckVocabularyPadding(*checkpoint));
  HostStaging staging;
  const std::vector<TensorShardRef> targets = Tensors(/*saving=*/false, &staging);
  RETURN_IF_ERROR(CheckOptimizerState(*checkpoint, targets));
  const absl::Status loaded = LoadTensors(*checkpoint, targets);
  if (absl::IsDataLoss(loaded)) return Unloadable(loaded, *survey, iteration);
  RETURN_IF_ERROR(loaded);
  staging.Upload();
  const CheckpointState state = checkpoint->State(context_.world().rank());
  if (!(c.no_load_optim() || c.finetune())) {
    updater_->optimizer().set_steps(state.optimizer_steps);
  }
  if (log != nullptr) {
    *log << absl::StrFormat("conveyor: loaded %s (iteration %d)%s\n", checkpoint->directory(),
                            state.iteration, c.finetune() ? ", --finetune: from iteration 0" : "");
  }
  const LoadedCheckpointId id{state.iteration, state.consumed_samples};
  if (c.finetune()) return LoadOutcome{id, ResumePoint{}};
  WarnIfGlobalBatchChanged(state, log);
  return LoadOutcome{id, ResumePoint{state.iteration, state.consumed_samples}};
}

absl::Status TrainingCheckpoints::StartWithoutCheckpoint(const CheckpointFolderSurvey& survey,
                                                         std::ostream* log) {
  const CheckpointConfig& c = config_.checkpoint();
  const std::string what =
      survey.exists ? absl::StrCat("holds no checkpoint (no ", kLatestFileName,
                                   " and no iter_* folder)")
                    : "does not exist";
  if (c.ckpt_step() > 0) {
    return absl::NotFoundError(absl::StrFormat(
        "--ckpt-step %d: --load %s %s; check the path, or drop --ckpt-step and --load to start "
        "from scratch",
        c.ckpt_step(), c.load(), what));
  }
  if (c.exit_on_missing_checkpoint()) {
    return absl::NotFoundError(absl::StrFormat(
        "--exit-on-missing-checkpoint: --load %s %s; check the path, or drop "
        "--exit-on-missing-checkpoint to start from iteration 0",
        c.load(), what));
  }
  // Megatron's behaviour: a --load folder without a checkpoint starts from scratch, so
  // the same command can start a job and resume it.
  if (log != nullptr) {
    *log << "conveyor: --load " << c.load() << " " << what << "; starting from iteration 0\n";
  }
  return c.load_hf().empty() ? absl::OkStatus() : LoadHuggingFace(log);
}

absl::StatusOr<int64_t> TrainingCheckpoints::ChooseIteration(
    const CheckpointFolderSurvey& survey) const {
  const CheckpointConfig& c = config_.checkpoint();
  if (c.ckpt_step() > 0) return c.ckpt_step();
  if (!survey.has_latest_file) {
    // Committed folders without a latest file: deleted by hand, or a crash between the
    // first save's rename and its latest file. Which one to load is the user's call.
    const int64_t newest = survey.committed_iterations.back();
    return absl::NotFoundError(absl::StrFormat(
        "--load %s holds committed checkpoints (iterations %s) but no %s naming the one to "
        "load; nothing was loaded or changed. Pass --ckpt-step %d to resume from the newest, "
        "or, to start from scratch, drop --load and use a fresh --save folder",
        c.load(), absl::StrJoin(survey.committed_iterations, ", "), kLatestFileName, newest));
  }
  absl::StatusOr<int64_t> latest = ReadLatestIteration(c.load());
  if (!latest.ok()) return Unloadable(latest.status(), survey, std::nullopt);
  return *latest;
}

absl::Status TrainingCheckpoints::Unloadable(const absl::Status& error,
                                             const CheckpointFolderSurvey& survey,
                                             std::optional<int64_t> iteration) const {
  const std::string& load = config_.checkpoint().load();
  // Every rank may be here at once, opening files on shared storage: a few of the
  // newest checkpoints are enough for a suggestion.
  constexpr int kTries = 3;
  std::string fix;
  const std::optional<int64_t> other = NewestOpenableIteration(load, survey, iteration, kTries);
  if (other.has_value()) {
    fix = absl::StrFormat(
        "pass --ckpt-step %d to resume from the newest other committed checkpoint that opens "
        "(%s), or, to start from scratch, drop --load and use a fresh --save folder",
        *other, JoinPath(load, IterationDirName(*other)));
  } else {
    const std::vector<int64_t>& committed = survey.committed_iterations;
    const int64_t others = std::count_if(committed.begin(), committed.end(),
                                         [&](int64_t it) { return it != iteration; });
    if (others > kTries) {
      fix = absl::StrFormat(
          "none of the %d newest other committed checkpoints in %s opens (older ones were not "
          "tried: --ckpt-step N picks one)",
          kTries, load);
    } else {
      fix = absl::StrFormat("no other committed checkpoint in %s opens", load);
    }
    absl::StrAppend(&fix,
                    ": restore the damaged files, or, to start from scratch, drop --load and use "
                    "a fresh --save folder");
  }
  // Starting from scratch here would let the next save overwrite these checkpoints.
  return absl::Status(error.code(),
                      absl::StrCat(error.message(), ". --load ", load,
                                   " holds checkpoints that this run cannot load, so it stops "
                                   "(nothing was loaded or changed): ",
                                   fix));
}

bool TrainingCheckpoints::WritesCheckpoints() const {
  const CheckpointConfig& c = config_.checkpoint();
  // Rank 0 commits; DP rank 0 of each (TP, PP) position writes parameters, and expert-data
  // rank 0 its experts'; with the distributed optimizer every rank writes its slice of the
  // optimizer state.
  return context_.world().rank() == 0 || context_.dp_cp().rank() == 0 ||
         context_.expert_dp().rank() == 0 ||
         (config_.parallel().use_distributed_optimizer() && !c.no_save_optim());
}

absl::Status TrainingCheckpoints::CannotHoldCheckpoints(const absl::Status& error) const {
  return absl::FailedPreconditionError(absl::StrFormat(
      "--save %s cannot hold checkpoints (%s); choose a folder this job can create and write "
      "(checked before training, so that no work is lost at the first save)",
      config_.checkpoint().save(), error.message()));
}

absl::Status TrainingCheckpoints::LockSaveFolder(std::ostream* log) {
  const std::string& save = config_.checkpoint().save();
  if (save.empty() || context_.world().rank() != 0) return absl::OkStatus();
  absl::StatusOr<SaveFolderLock> lock = SaveFolderLock::Acquire(save);
  if (absl::IsUnavailable(lock.status())) return lock.status();  // another run holds it
  if (!lock.ok()) return CannotHoldCheckpoints(lock.status());
  save_lock_.emplace(*std::move(lock));
  // Before anything loads from the folder: a crash in the middle of a replacement
  // without atomic exchange left an iteration renamed aside.
  ASSIGN_OR_RETURN(const std::vector<std::string> restored,
                   RestoreInterruptedReplacements(save));
  for (const std::string& name : restored) {
    if (log == nullptr) continue;
    *log << "conveyor: restored " << JoinPath(save, name)
         << ", which a crash had left moved aside while a save replaced it\n";
  }
  return absl::OkStatus();
}

absl::Status TrainingCheckpoints::PrepareSaveFolder(const LoadedCheckpointId& loaded,
                                                    std::ostream* log) {
  const CheckpointConfig& c = config_.checkpoint();
  if (c.save().empty() || !WritesCheckpoints()) return absl::OkStatus();
  if (absl::Status probe = ProbeSaveFolder(c.save(), context_.world().rank()); !probe.ok()) {
    return CannotHoldCheckpoints(probe);
  }
  if (!save_lock_.has_value()) return absl::OkStatus();
  ASSIGN_OR_RETURN(
      SaveFolderClaim claim,
      ClaimSaveFolder(c.save(), {c.load(), loaded.iteration, c.finetune()}, c.overwrite_save()));
  if (!claim.removed.empty() && log != nullptr) {
    *log << "conveyor: removed what interrupted saves left in --save " << c.save() << ": "
         << absl::StrJoin(claim.removed, ", ") << "\n";
  }
  overwritten_ = std::move(claim.overwritten);
  log_ = log;
  return absl::OkStatus();
}

absl::Status TrainingCheckpoints::Committed(std::optional<int64_t> iteration) {
  if (!iteration.has_value()) return absl::OkStatus();
  committed_.insert(*iteration);
  if (overwritten_.empty()) return absl::OkStatus();
  const std::string& save = config_.checkpoint().save();
  ASSIGN_OR_RETURN(const std::vector<std::string> retired,
                   RetireOverwrittenCheckpoints(save, overwritten_, committed_));
  overwritten_.clear();
  if (!retired.empty() && log_ != nullptr) {
    *log_ << "conveyor: --overwrite-save: removed the earlier run's checkpoints from --save "
          << save << " now that this run has committed its own: " << absl::StrJoin(retired, ", ")
          << "\n";
  }
  return absl::OkStatus();
}

std::optional<int64_t> TrainingCheckpoints::InFlight() const {
  if (async_ == nullptr || !async_->in_flight()) return std::nullopt;
  return async_->in_flight_iteration();
}

absl::Status TrainingCheckpoints::CheckVocabularyPadding(const LoadedCheckpoint& checkpoint) const {
  const TensorRecord* embedding = checkpoint.FindTensor(kWordEmbeddings);
  const int64_t rows = stage_->chunk(0).shape().padded_vocab;
  if (embedding == nullptr || embedding->global_shape_size() != 2 ||
      embedding->global_shape(0) == rows) {
    return absl::OkStatus();
  }
  const int64_t saved_rows = embedding->global_shape(0);
  const Config& saved = checkpoint.manifest().config();
  const int64_t vocab = config_.model().vocab_size();
  const int64_t saved_tp = std::max(1, checkpoint.manifest().layout().tensor_model_parallel_size());
  const int64_t tp = context_.tp_size();
  // CheckSameModel has refused another vocabulary size: the saved rows hold this
  // run's vocabulary, so a divisor exists unless TP does not divide them.
  std::string fix;
  const std::optional<PaddingDivisor> d = DivisorForPaddedVocab(vocab, saved_rows, tp, saved_tp);
  if (d.has_value()) {
    fix = absl::StrFormat(
        "pass --make-vocab-size-divisible-by %d: with it, TP %d pads to %d rows like the "
        "checkpoint%s",
        d->divisor, tp, saved_rows,
        d->fits_other_tp ? absl::StrFormat(" (and so does the saving TP %d)", saved_tp) : "");
  } else {
    fix = absl::StrFormat(
        "no --make-vocab-size-divisible-by pads to %d rows under TP %d, as %d is not a "
        "multiple of %d: load it with a --tensor-model-parallel-size that divides %d (the "
        "saving run used %d)",
        saved_rows, tp, saved_rows, tp, saved_rows, saved_tp);
  }
  return absl::FailedPreconditionError(absl::StrFormat(
      "--load %s: the padded vocabulary differs: the checkpoint's %s has %d rows (vocabulary "
      "%d padded to a multiple of --make-vocab-size-divisible-by %d x TP %d), this run's has %d "
      "(a multiple of %d x TP %d). The padding depends on --make-vocab-size-divisible-by x "
      "--tensor-model-parallel-size; %s",
      checkpoint.directory(), kWordEmbeddings, saved_rows, saved.model().vocab_size(),
      saved.model().make_vocab_size_divisible_by(), saved_tp, rows,
      config_.model().make_vocab_size_divisible_by(), tp, fix));
}

absl::Status TrainingCheckpoints::CheckOptimizerState(
    const LoadedCheckpoint& checkpoint, const std::vector<TensorShardRef>& targets) const {
  const std::vector<std::string> names = checkpoint.TensorNames();
  const bool has_optimizer_state =
      std::any_of(names.begin(), names.end(),
                  [](const std::string& n) { return absl::StartsWith(n, kOptimizerPrefix); });
  for (const TensorShardRef& target : targets) {
    if (!absl::StartsWith(target.name, kOptimizerPrefix) ||
        checkpoint.FindTensor(target.name) != nullptr) {
      continue;
    }
    const int64_t iteration = checkpoint.iteration();
    if (!has_optimizer_state) {
      // Megatron: "Specify --no-load-optim or --finetune to prevent attempting to load
      // the optimizer state".
      return absl::FailedPreconditionError(absl::StrFormat(
          "checkpoint %s was saved without optimizer state (--no-save-optim), so it cannot "
          "resume the optimizer: pass --no-load-optim to load the weights with a fresh "
          "optimizer and resume at iteration %d, or --finetune to load the weights and start "
          "at iteration 0",
          checkpoint.directory(), iteration));
    }
    return absl::FailedPreconditionError(absl::StrFormat(
        "checkpoint %s has no optimizer state '%s' (saved with --optimizer %s, this run uses "
        "--optimizer %s): pass --no-load-optim to load the weights with a fresh optimizer, or "
        "--finetune to start at iteration 0",
        checkpoint.directory(), target.name, checkpoint.manifest().config().optimizer().optimizer(),
        config_.optimizer().optimizer()));
  }
  return absl::OkStatus();
}

void TrainingCheckpoints::WarnIfGlobalBatchChanged(const CheckpointState& saved,
                                                   std::ostream* log) const {
  const int64_t was = saved.config.training().global_batch_size();
  const int64_t now = config_.training().global_batch_size();
  if (log == nullptr || was <= 0 || was == now) return;
  const int64_t micro = config_.training().micro_batch_size();
  const int64_t per_micro_batch = micro * context_.dp_size();  // samples per micro-batch step
  std::string fix;
  if (per_micro_batch > 0 && was % per_micro_batch == 0) {
    fix = absl::StrFormat(
        "pass --global-batch-size %d to keep it (with --num-micro-batches 0, or %d, if your "
        "config sets --num-micro-batches)",
        was, was / per_micro_batch);
  } else {
    fix = absl::StrFormat(
        "this layout cannot keep it: %d is not a multiple of --micro-batch-size %d x DP %d; "
        "change --micro-batch-size or the data-parallel size",
        was, micro, context_.dp_size());
  }
  *log << absl::StrFormat(
      "conveyor: warning: the global batch size changes on resume: the checkpoint was trained "
      "with %d samples per step (%d samples consumed in %d iterations), this run takes %d "
      "(--micro-batch-size %d x --num-micro-batches %d x DP %d); %s\n",
      was, saved.consumed_samples, saved.iteration, now, micro,
      config_.training().num_micro_batches(), context_.dp_size(), fix);
}

absl::Status TrainingCheckpoints::Save(const ResumePoint& point) {
  RETURN_IF_ERROR(updater_->ParametersCurrent());  // --overlap-param-gather's gathers
  CheckpointState state;
  state.config = config_;
  state.iteration = point.iteration;
  state.consumed_samples = point.consumed_samples;
  state.data_position.set_train_consumed_samples(point.consumed_samples);
  state.layout.set_tensor_model_parallel_size(context_.tp_size());
  state.layout.set_pipeline_model_parallel_size(context_.pipeline().num_ranks);
  state.layout.set_data_parallel_size(context_.dp_size());
  state.layout.set_world_size(context_.world().size());
  state.layout.set_virtual_pipeline_stages(stage_->num_chunks());
  state.layout.set_use_distributed_optimizer(config_.parallel().use_distributed_optimizer());
  state.optimizer_steps = updater_->optimizer().steps();
  HostStaging staging;  // the writers copy or write what they need before returning
  const std::vector<TensorShardRef> tensors = Tensors(/*saving=*/true, &staging);
  if (async_ != nullptr) {
    const std::optional<int64_t> committing = InFlight();  // Start commits it first
    RETURN_IF_ERROR(async_->Start(state, tensors, context_.world()));
    return Committed(committing);
  }
  RETURN_IF_ERROR(SaveCheckpoint(config_.checkpoint().save(), state, tensors, context_.world(),
                                 OwnershipGuard()));
  return Committed(point.iteration);
}

absl::Status TrainingCheckpoints::Finish() {
  const std::optional<int64_t> committing = InFlight();
  if (committing.has_value()) RETURN_IF_ERROR(async_->Finish(context_.world()));
  return Committed(committing);
}

}  // namespace conveyor
