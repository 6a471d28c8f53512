#include "parallel/rank_environment.h"

#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "base/status_macros.h"

namespace conveyor {
namespace {

// The variables one launcher sets; torchrun's and Slurm's differ only in names.
struct LauncherVariables {
  const char* rank;
  const char* world_size;
  const char* local_rank;
  const char* local_world_size;
};

constexpr LauncherVariables kTorchrun = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"};
constexpr LauncherVariables kSlurm = {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
                                      "SLURM_NTASKS_PER_NODE"};

// Parses an integer variable into [min, max]. Unset leaves *out alone and returns
// false; set but malformed is an error that names the variable and its value.
absl::StatusOr<bool> ReadInt(const EnvLookup& getenv_fn, const char* name, int min, int max,
                             int* out) {
  const char* text = getenv_fn(name);
  if (text == nullptr) return false;
  int value = 0;
  if (!absl::SimpleAtoi(text, &value)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("environment variable %s=\"%s\" is not an integer", name, text));
  }
  if (value < min || value > max) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "environment variable %s=%d is out of range [%d, %d]", name, value, min, max));
  }
  *out = value;
  return true;
}

constexpr int kMaxInt = 1 << 30;

// The job's name as the first launcher variable that gives one reads, "VARIABLE=value".
std::string JobIdFromEnv(const EnvLookup& getenv_fn) {
  for (const char* name : {kJobIdEnv, "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID"}) {
    const char* value = getenv_fn(name);
    const absl::string_view id = value == nullptr ? "" : value;
    // torchrun's --rdzv-id defaults to "none", which names no job.
    if (id.empty() || (id == "none" && absl::string_view(name) == "TORCHELASTIC_RUN_ID")) continue;
    return absl::StrCat(name, "=", id);
  }
  return "";
}

}  // namespace

absl::StatusOr<std::optional<RankEnvironment>> RankEnvironmentFromEnv(const EnvLookup& getenv_fn) {
  // torchrun wins when both are set: `srun torchrun ...` sets both, and torchrun's
  // variables describe the processes it started.
  const LauncherVariables& vars = getenv_fn(kTorchrun.rank) != nullptr ? kTorchrun
                                  : getenv_fn(kSlurm.rank) != nullptr  ? kSlurm
                                                                       : kTorchrun;
  RankEnvironment env;
  ASSIGN_OR_RETURN(bool has_rank, ReadInt(getenv_fn, vars.rank, 0, kMaxInt, &env.rank));
  if (!has_rank) return std::optional<RankEnvironment>();

  ASSIGN_OR_RETURN(bool has_world,
                   ReadInt(getenv_fn, vars.world_size, 1, kMaxInt, &env.world_size));
  if (!has_world) {
    return absl::InvalidArgumentError(
        absl::StrFormat("environment variable %s is set but %s is not; set both (or neither, for a "
                        "one-process run)",
                        vars.rank, vars.world_size));
  }
  if (env.rank >= env.world_size) {
    return absl::InvalidArgumentError(
        absl::StrFormat("environment variable %s=%d must be less than %s=%d", vars.rank, env.rank,
                        vars.world_size, env.world_size));
  }
  // A missing LOCAL_RANK is fine on one node per rank; it only picks the GPU.
  RETURN_IF_ERROR(ReadInt(getenv_fn, vars.local_rank, 0, kMaxInt, &env.local_rank).status());
  RETURN_IF_ERROR(
      ReadInt(getenv_fn, vars.local_world_size, 1, kMaxInt, &env.local_world_size).status());

  if (const char* addr = getenv_fn("MASTER_ADDR"); addr != nullptr) {
    env.master_addr = addr;
  }
  RETURN_IF_ERROR(ReadInt(getenv_fn, "MASTER_PORT", 1, 65535, &env.master_port).status());
  env.store_port = env.master_port;
  RETURN_IF_ERROR(ReadInt(getenv_fn, kStorePortEnv, 1, 65535, &env.store_port).status());
  if (const char* dir = getenv_fn(kRunDirEnv); dir != nullptr && dir[0] != '\0') {
    env.run_dir = dir;
  }
  env.job_id = JobIdFromEnv(getenv_fn);
  if (const char* interface = getenv_fn(kGlooInterfaceEnv); interface != nullptr) {
    env.gloo_interface = interface;
  }

  const bool has_master = !env.master_addr.empty() && env.store_port != 0;
  if (env.world_size > 1 && env.run_dir.empty() && !has_master) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s=%d, %s=%d: the ranks need a place to rendezvous; set %s to a directory "
                        "shared by all ranks (or MASTER_ADDR and MASTER_PORT)",
                        vars.rank, env.rank, vars.world_size, env.world_size, kRunDirEnv));
  }
  return std::optional<RankEnvironment>(env);
}

absl::StatusOr<std::optional<RankEnvironment>> RankEnvironmentFromEnv() {
  return RankEnvironmentFromEnv([](const char* name) { return std::getenv(name); });
}

absl::Status CheckLauncherAgreement(int nproc_per_node, int nnodes, const EnvLookup& getenv_fn) {
  if (nproc_per_node <= 1) return absl::OkStatus();
  // The first of WORLD_SIZE and SLURM_NTASKS that holds a positive number, as the
  // config's world size is read (trainer/config/config_validation.h, WorldSizeFromEnvironment).
  const LauncherVariables* vars = nullptr;
  int world = 0;
  for (const LauncherVariables* candidate : {&kTorchrun, &kSlurm}) {
    const char* text = getenv_fn(candidate->world_size);
    if (text != nullptr && absl::SimpleAtoi(text, &world) && world > 0) {
      vars = candidate;
      break;
    }
  }
  if (vars == nullptr || world <= 1) return absl::OkStatus();
  const char* rank_variable = getenv_fn(kTorchrun.rank) != nullptr ? kTorchrun.rank
                              : getenv_fn(kSlurm.rank) != nullptr  ? kSlurm.rank
                                                                   : nullptr;
  if (rank_variable == nullptr && int64_t{nproc_per_node} * nnodes == world) {
    return absl::OkStatus();
  }
  const std::string launched =
      rank_variable == nullptr ? absl::StrFormat("%s=%d", vars->world_size, world)
                               : absl::StrFormat("%s=%s and %s=%d", rank_variable,
                                                 getenv_fn(rank_variable), vars->world_size, world);
  const std::string unset = rank_variable == nullptr
                                ? vars->world_size
                                : absl::StrFormat("%s and %s", rank_variable, vars->world_size);
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s in the environment (an external launcher such as torchrun or srun starts one "
      "process per rank) and --nproc-per-node %d (the built-in launcher forks %d ranks here) "
      "contradict each other: under torchrun or srun drop --nproc-per-node; to fork the ranks "
      "with the built-in launcher, unset %s",
      launched, nproc_per_node, nproc_per_node, unset));
}

absl::Status CheckLauncherAgreement(int nproc_per_node, int nnodes) {
  return CheckLauncherAgreement(nproc_per_node, nnodes,
                                [](const char* name) { return std::getenv(name); });
}

std::string DescribeRankEnvironment(const RankEnvironment& env) {
  std::string text =
      absl::StrFormat("rank %d of %d (local rank %d)", env.rank, env.world_size, env.local_rank);
  if (!env.run_dir.empty()) absl::StrAppend(&text, ", rendezvous in ", env.run_dir);
  if (!env.master_addr.empty()) {
    absl::StrAppendFormat(&text, ", master %s:%d", env.master_addr, env.master_port);
    if (env.run_dir.empty()) absl::StrAppendFormat(&text, ", TCP store port %d", env.store_port);
  }
  if (!env.job_id.empty()) absl::StrAppend(&text, ", job ", env.job_id);
  return text;
}

}  // namespace conveyor
