#include "trainer/cli.h"

#include <memory>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "base/atomic_file.h"
#include "base/status_macros.h"
#include "data/training_data.h"
#include "parallel/launcher.h"
#include "parallel/parallel_state.h"
#include "parallel/rank_environment.h"
#include "runtime/cpu/gemm.h"
#include "runtime/cpu/thread_pool.h"
#include "runtime/cuda/device.h"
#include "trainer/backend.h"
#include "trainer/checkpoint/load_preview.h"
#include "trainer/checkpoint_args.h"
#include "trainer/config_validation.h"
#include "trainer/effective_config.h"
#include "trainer/flags.h"
#include "trainer/hf/export.h"
#include "trainer/hf/export_command.h"
#include "trainer/host_memory_fit.h"
#include "trainer/input_fingerprint.h"
#include "trainer/line_file.h"
#include "trainer/megatron_flags_not_here.h"
#include "trainer/output_files.h"
#include "trainer/plan.h"
#include "trainer/plan_html.h"
#include "trainer/rank_training.h"
#include "trainer/rehearsal.h"
#include "trainer/resolved_config.h"
#include "trainer/training_data_turns.h"

namespace conveyor {
namespace {

constexpr char kProgram[] = "trainer";

// Prints `status` as the run's one error line and returns its exit code by the
// project's rule (base/exit_code.h). `who` names the rank ("rank 3: "); messages that
// already begin with it ("rank 3: creating the world group ...", "rank 3 of 8: ...")
// get no second prefix. A refusal outside a rank also says where the flags are listed.
int Fail(std::ostream& err, const std::string& who, const absl::Status& status) {
  const absl::string_view message = status.message();
  const absl::string_view stem = absl::StripSuffix(who, ": ");
  const bool named = !stem.empty() && absl::StartsWith(message, stem) &&
                     (message.size() == stem.size() ||
                      !absl::ascii_isdigit(static_cast<unsigned char>(message[stem.size()])));
  err << kProgram << ": error: " << (named ? "" : who) << message << "\n";
  const int code = ExitCodeFor(status);
  if (code == kExitUsage && who.empty()) {
    err << kProgram << ": run with --help to list every flag\n";
  }
  return code;
}

// What reading the command line and the files it names (--config, a config.json, the
// tokenizer, the launcher's environment) returns is a refusal of that input, whatever
// code the reader chose (a tokenizer file's parse error may say DataLoss).
int Refuse(std::ostream& err, const absl::Status& status) {
  return Fail(err, "",
              IsInputRefusal(status) ? status : absl::InvalidArgumentError(status.message()));
}

// After a rank's run succeeded: the ranks meet once more, and the run directory's
// rendezvous files go (ParallelState::Finish).
int FinishRun(ParallelState& state, std::ostream& err, const std::string& who) {
  if (absl::Status finished = state.Finish(); !finished.ok()) {
    return Fail(err, who, finished);
  }
  return kExitOk;
}

// A rank's CPU threads: the ranks on a machine share the CPUs the process may use
// (affinity and cgroup quota, docs/design.md §9). `one_process`: a job of one process
// (no launcher), which takes them all.
int CpuThreadsPerRank(const Config& config, bool one_process) {
  const int local_ranks = one_process ? 1 : config.parallel().nproc_per_node();
  return std::max(1, cpu::UsableCpus() / local_ranks);
}

// One rank's whole run: groups, data, model, training. `env` is null for a job of
// one process.
// This rank's datasets: Megatron's split sizes (the training split sized by
// --train-samples when it is given, the same sample order as Megatron's for the same data
// and seed), built in turns by the ranks so that each view of --data-cache-path is
// written once.
absl::StatusOr<DataSplits> BuildRankData(const Config& config, Communicator& world,
                                         int local_rank) {
  const TrainingConfig& t = config.training();
  SplitSampleCounts counts =
      MegatronSampleCounts(t.train_iters(), t.global_batch_size(), config.data().eval_interval(),
                           config.data().eval_iters());
  if (t.train_samples() > 0) counts.train = t.train_samples();
  return BuildTrainingDataInTurns(config, counts, world, local_rank);
}

// The logging rank's last lines: what was trained (skipped steps, --nan-policy skip,
// changed nothing and are not counted as trained) and the device memory.
void PrintRunEnd(const TrainingResult& result, const Backend& backend, std::ostream& out) {
  const int64_t skipped = result.skipped_iterations;
  out << absl::StrFormat("conveyor: trained %d iterations",
                         static_cast<int64_t>(result.losses.size()) - skipped);
  if (skipped > 0) {
    out << absl::StrFormat(" (%d more skipped for a NaN or inf, --nan-policy skip)", skipped);
  }
  if (!result.losses.empty()) {
    out << absl::StrFormat(", final lm loss %.4f", result.losses.back());
  }
  out << "\n";
  const std::string memory = DeviceMemorySummary(backend);
  if (!memory.empty()) out << "conveyor: " << memory << "\n";
}

int RunRank(const ResolvedConfig& resolved, const RankEnvironment* env, std::ostream& out,
            std::ostream& err) {
  const Config& config = resolved.config();
  const std::string who = env == nullptr ? "" : absl::StrFormat("rank %d: ", env->rank);
  cpu::SetCpuThreads(CpuThreadsPerRank(config, env == nullptr));
  // The backend first: the groups move its tensors, through its transport.
  const absl::StatusOr<Backend> backend =
      StartBackend(resolved, env == nullptr ? 0 : env->local_rank);
  if (!backend.ok()) {
    return Fail(err, who, backend.status());
  }
  absl::StatusOr<std::unique_ptr<ParallelState>> state =
      env == nullptr
          ? ParallelState::SingleProcess(backend->transport)
          : ParallelState::Create(
                *env, resolved.layout(),
                absl::Minutes(config.parallel().distributed_timeout_minutes()), backend->transport,
                [&config](Communicator& world) { return AgreeOnConfigAndInputs(config, world); });
  if (!state.ok()) {
    return Fail(err, who, state.status());
  }
  if (backend->ops != CpuBackend().ops && IsLoggingRank(**state)) {
    out << "conveyor: " << backend->description << "\n";
  }
  if (config.parallel().pipeline_rehearsal_ms() > 0) {
    absl::StatusOr<RehearsalResult> rehearsal =
        RunRehearsal(resolved, **state, IsLoggingRank(**state) ? &out : nullptr);
    if (!rehearsal.ok()) {
      return Fail(err, who, rehearsal.status());
    }
    return FinishRun(**state, err, who);
  }
  absl::StatusOr<DataSplits> data =
      BuildRankData(config, (**state).world(), env == nullptr ? 0 : env->local_rank);
  if (!data.ok()) {
    return Fail(err, who, data.status());
  }
  std::unique_ptr<LineFile> metrics;
  if (!config.logging().metrics_file().empty() && IsLoggingRank(**state)) {
    // Appended to: a resumed (or relaunched) run adds its records after the earlier
    // ones instead of wiping them.
    absl::StatusOr<std::unique_ptr<LineFile>> opened =
        LineFile::Open("--metrics-file", config.logging().metrics_file());
    if (!opened.ok()) return Fail(err, who, opened.status());
    metrics = std::move(*opened);
  }
  std::unique_ptr<tensorboard::MegatronScalars> tensorboard;
  if (!config.logging().tensorboard_dir().empty() && IsTensorBoardRank(**state)) {
    absl::StatusOr<std::unique_ptr<tensorboard::MegatronScalars>> started =
        tensorboard::MegatronScalars::Start(config.logging());
    if (!started.ok()) return Fail(err, who, started.status());
    tensorboard = std::move(*started);
  }
  absl::StatusOr<RankRun> run =
      TrainOnRank(resolved, **state, *data->train, {&out, metrics.get(), tensorboard.get()},
                  {data->valid.get(), data->test.get()}, *backend);
  if (!run.ok()) {
    return Fail(err, who, run.status());
  }
  if (metrics != nullptr) {
    if (absl::Status closed = metrics->Close(); !closed.ok()) return Fail(err, who, closed);
  }
  if (tensorboard != nullptr) {
    absl::StatusOr<std::string> closed = tensorboard->Close((**state).rank());
    if (!closed.ok()) return Fail(err, who, closed.status());
    out << *closed << "\n";
  }
  if (IsLoggingRank(**state)) PrintRunEnd(run->result, *backend, out);
  return FinishRun(**state, err, who);
}

// The ranks of this job whose memory this machine holds: all of them for the built-in
// launcher; when an external launcher says how many ranks share the node, this rank's
// node, whose ranks are consecutive; else this process alone.
RanksOnHost RanksSharingThisHost(const RankEnvironment* env, int world_size) {
  if (env == nullptr) return {0, world_size};
  if (env->local_world_size > 0) return {env->rank - env->local_rank, env->local_world_size};
  return {env->rank, 1};
}

// A Hugging Face model's config.json (--load-hf) fixes the model flags before anything
// reads them; the fields it does not know are warned about on `err`.
absl::Status ApplyLoadHfConfig(Config* config, std::ostream& err) {
  if (config->checkpoint().load_hf().empty()) return absl::OkStatus();
  std::vector<std::string> warnings;
  RETURN_IF_ERROR(ApplyHfConfig(config->checkpoint().load_hf(), config, &warnings));
  for (const std::string& warning : warnings) {
    err << kProgram << ": warning: " << warning << "\n";
  }
  return absl::OkStatus();
}

// What the first rank says before anything runs: the Megatron flags that change nothing
// here, a --save-interval that saves nothing, the backend, and every setting (Megatron's
// argument dump).
void PrintRunStart(const ResolvedConfig& resolved,
                   const std::vector<std::string>& ignored_megatron_flags, std::ostream& out,
                   std::ostream& err) {
  for (const std::string& warning : MegatronNoOpWarnings(ignored_megatron_flags)) {
    err << kProgram << ": " << warning << "\n";
  }
  const CheckpointConfig& ckpt = resolved.config().checkpoint();
  if (ckpt.save_interval() > 0 && ckpt.save().empty()) {  // tolerated, as Megatron does
    err << kProgram << ": warning: --save-interval " << ckpt.save_interval()
        << " without --save: no checkpoint is saved\n";
  }
  const GpuInfo gpus = ProbeGpus();
  out << "conveyor: " << DescribeBackend(gpus)
      << (gpus.count > 0 && !resolved.on_gpu()
              ? "; training runs on the CPU backend (fp32): --device cuda trains on the GPU"
              : "")
      << "\n";
  out << FormatEffectiveConfig(resolved.config());
}

// --dry-run: the plan and its host-memory line, and with --plan-html the plan's page.
int DryRun(const ResolvedConfig& resolved, const ModelShape& shape, const RanksOnHost& on_host,
           const StartupMemory& startup, std::ostream& out, std::ostream& err) {
  absl::StatusOr<std::string> plan = FormatPlan(resolved, shape);
  if (!plan.ok()) return Refuse(err, plan.status());
  const CheckpointConfig& ckpt = resolved.config().checkpoint();
  if (!ckpt.load().empty()) {
    // --load is read as the run reads it before training (load_preview.h).
    absl::StatusOr<std::string> load = PreviewLoad(ckpt.load(), ckpt.ckpt_step());
    if (!load.ok()) return Refuse(err, load.status());
    absl::StrAppend(&*plan, *load, "\n");
  }
  out << *plan << HostMemoryLine(resolved, on_host, startup);
  const std::string& html = resolved.config().logging().plan_html();
  if (html.empty()) return kExitOk;
  absl::StatusOr<std::string> page = PlanHtml(resolved, shape);
  if (!page.ok()) return Refuse(err, page.status());
  if (absl::Status written = WriteFile(html, *page, Durability::kVisible); !written.ok()) {
    return Fail(err, "",
                absl::Status(written.code(), absl::StrCat("--plan-html: ", written.message(),
                                                          "; choose a writable path")));
  }
  out << "plan: page written to " << html << "\n";
  return kExitOk;
}

}  // namespace

int RunCli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (!args.empty() && args[0] == "export") {
    return RunExportCommand(std::vector<std::string>(args.begin() + 1, args.end()), out, err);
  }
  if (WantsHelp(args)) {
    out << FlagHelp();
    return kExitOk;
  }
  std::vector<std::string> ignored_megatron_flags;
  absl::StatusOr<Config> parsed = ParseFlags(args, &ignored_megatron_flags);
  if (!parsed.ok()) return Refuse(err, parsed.status());
  if (absl::Status hf = ApplyLoadHfConfig(&*parsed, err); !hf.ok()) return Refuse(err, hf);
  if (absl::Status saved = ApplyCheckpointArgs(&*parsed, out); !saved.ok()) {
    return Refuse(err, saved);
  }
  // torchrun's or srun's environment and --nproc-per-node > 1 cannot both hold; said
  // first, as what else the environment lacks follows from it.
  if (absl::Status agree =
          CheckLauncherAgreement(parsed->parallel().nproc_per_node(), parsed->parallel().nnodes());
      !agree.ok()) {
    return Refuse(err, agree);
  }
  absl::StatusOr<std::optional<RankEnvironment>> env = RankEnvironmentFromEnv();
  if (!env.ok()) return Refuse(err, env.status());
  const int world_size = WorldSizeFromEnvironment(*parsed);
  // Resolved once (derived values and the tokenizer's vocabulary); everything below
  // reads this.
  absl::StatusOr<ResolvedConfig> resolved = ResolvedConfig::Resolve(*parsed, world_size);
  if (!resolved.ok()) return Refuse(err, resolved.status());
  const Config& config = resolved->config();

  const bool first_rank = !env->has_value() || (*env)->rank == 0;
  if (first_rank) PrintRunStart(*resolved, ignored_megatron_flags, out, err);
  const ModelShape& shape = resolved->model_shape();
  // An external launcher's ranks; one launched process with --nproc-per-node > 1 forks
  // them itself (srun -n1 trainer --nproc-per-node 4).
  const bool launched_alone = env->has_value() && (*env)->world_size == 1 && world_size > 1;
  const RankEnvironment* external = env->has_value() && !launched_alone ? &**env : nullptr;
  const RanksOnHost on_host = RanksSharingThisHost(external, world_size);
  // Measured before any tensor exists; the built-in launcher's ranks are forks of this
  // process, an external launcher's are programs of their own.
  const StartupMemory startup =
      RanksStartupMemory(ThisProcessMemory(), on_host, /*own_processes=*/external != nullptr,
                         CpuThreadsPerRank(config, world_size == 1 && external == nullptr));
  if (config.training().dry_run()) {
    return first_rank ? DryRun(*resolved, shape, on_host, startup, out, err) : kExitOk;
  }
  if (absl::Status writable = CheckOutputFiles(config); !writable.ok()) {
    return Refuse(err, writable);
  }
  if (const std::string warning = ProfileWindowWarning(config); first_rank && !warning.empty()) {
    err << kProgram << ": " << warning << "\n";
  }
  if (absl::Status fits = CheckRunFitsHostMemory(*resolved, on_host, startup); !fits.ok()) {
    return Fail(err, "", fits);
  }
  if (external != nullptr) return RunRank(*resolved, external, out, err);
  if (world_size == 1) return RunRank(*resolved, nullptr, out, err);
  if (config.parallel().nnodes() > 1) {
    return Refuse(err, absl::InvalidArgumentError(
                           "--nnodes > 1: start one trainer per rank with torchrun or srun "
                           "(RANK/WORLD_SIZE or SLURM_PROCID/SLURM_NTASKS); the built-in "
                           "launcher starts ranks on this machine only"));
  }
  out.flush();
  LaunchOptions launch;
  launch.ranks_handle_signals = config.checkpoint().exit_signal_handler();
  return LaunchLocalRanks(
      config.parallel().nproc_per_node(),
      [&](const RankEnvironment& rank_env) { return RunRank(*resolved, &rank_env, out, err); }, err,
      launch);
}

}  // namespace conveyor
