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
#include "parallel/launcher.h"
#include "parallel/rank_environment.h"
#include "runtime/cuda/device.h"
#include "trainer/backend.h"
#include "trainer/checkpoint/load_preview.h"
#include "trainer/config/checkpoint_args.h"
#include "trainer/config/config_validation.h"
#include "trainer/config/effective_config.h"
#include "trainer/config/flags.h"
#include "trainer/config/megatron_flags_not_here.h"
#include "trainer/config/resolved_config.h"
#include "trainer/hf/export.h"
#include "trainer/hf/export_command.h"
#include "trainer/output_files.h"
#include "trainer/planning/host_memory_fit.h"
#include "trainer/planning/plan.h"
#include "trainer/planning/plan_html.h"
#include "trainer/rank_training.h"

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

// One rank's whole run (RunRank), its failure printed with the rank named.
int RunRankAndReport(const ResolvedConfig& resolved, const RankEnvironment* env,
                     std::ostream& out, std::ostream& err) {
  const absl::Status status = RunRank(resolved, env, out);
  if (status.ok()) return kExitOk;
  return Fail(err, env == nullptr ? "" : absl::StrFormat("rank %d: ", env->rank), status);
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
int DryRun(const ResolvedConfig& resolved, const RanksOnHost& on_host,
           const StartupMemory& startup, std::ostream& out, std::ostream& err) {
  absl::StatusOr<std::string> plan = FormatPlan(resolved);
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
  absl::StatusOr<std::string> page = PlanHtml(resolved);
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
    return first_rank ? DryRun(*resolved, on_host, startup, out, err) : kExitOk;
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
  if (external != nullptr) return RunRankAndReport(*resolved, external, out, err);
  if (world_size == 1) return RunRankAndReport(*resolved, nullptr, out, err);
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
      [&](const RankEnvironment& rank_env) {
        return RunRankAndReport(*resolved, &rank_env, out, err);
      },
      err, launch);
}

}  // namespace conveyor
