// Who this process is in a multi-process job, as told by whoever started it: the
// built-in launcher (LaunchLocalRanks), torchrun-style variables, or Slurm.
#ifndef CONVEYOR_PARALLEL_RANK_ENVIRONMENT_H_
#define CONVEYOR_PARALLEL_RANK_ENVIRONMENT_H_

#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace conveyor {

// Looks up an environment variable; nullptr when unset (the signature of getenv).
// Same alias as trainer/config/config_validation.h; redeclaring an identical alias is legal.
using EnvLookup = std::function<const char*(const char*)>;

struct RankEnvironment {
  int rank = 0;  // global rank, 0 <= rank < world_size
  int world_size = 1;
  int local_rank = 0;  // index on this node; picks the GPU
  // Ranks on this node, when the launcher says (LOCAL_WORLD_SIZE, SLURM_NTASKS_PER_NODE);
  // 0 when it does not.
  int local_world_size = 0;
  std::string master_addr;  // empty when not given
  int master_port = 0;      // 0 when not given
  // Where global rank 0 serves the TCP rendezvous store: CONVEYOR_STORE_PORT, else
  // MASTER_PORT (torchrun's own store already holds MASTER_PORT on the master node).
  int store_port = 0;
  // Directory shared by all ranks where they rendezvous and post progress for timeout
  // diagnostics. Set by LaunchLocalRanks or CONVEYOR_RUN_DIR; when empty, the ranks
  // meet at the TCP store at MASTER_ADDR:store_port (parallel/rendezvous_point.h).
  std::string run_dir;
  // The job this rank belongs to, as its launcher names it ("CONVEYOR_JOB_ID=<id>",
  // "TORCHELASTIC_RUN_ID=<id>" or "SLURM_JOB_ID=<id>"); empty when none does (and under
  // the built-in launcher, whose run directory is fresh). Ranks meet only ranks of their
  // own job: two jobs sharing CONVEYOR_RUN_DIR meet apart, and a rank that reaches
  // another job's TCP store is refused.
  std::string job_id;
  // The network interface gloo binds (GLOO_SOCKET_IFNAME, as in PyTorch), e.g. "ib0";
  // empty: the address this host's name resolves to.
  std::string gloo_interface;
};

// Environment variable that names the shared rendezvous directory.
inline constexpr char kRunDirEnv[] = "CONVEYOR_RUN_DIR";
// Environment variable that moves the TCP store off MASTER_PORT.
inline constexpr char kStorePortEnv[] = "CONVEYOR_STORE_PORT";
// Environment variable that names the network interface gloo binds.
inline constexpr char kGlooInterfaceEnv[] = "GLOO_SOCKET_IFNAME";
// Environment variable that names the job, for launchers that name none.
inline constexpr char kJobIdEnv[] = "CONVEYOR_JOB_ID";

// Reads RANK/WORLD_SIZE/LOCAL_RANK (torchrun) or, when RANK is unset,
// SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID; plus MASTER_ADDR/MASTER_PORT,
// CONVEYOR_STORE_PORT, CONVEYOR_RUN_DIR and the job: the first of CONVEYOR_JOB_ID,
// TORCHELASTIC_RUN_ID (unless torchrun's default "none") and SLURM_JOB_ID. Returns
// nullopt when neither RANK nor SLURM_PROCID is set (a one-process run). Errors name the
// variable: a malformed or out-of-range number, a rank without a world size, or a world
// size > 1 with no way to rendezvous (neither CONVEYOR_RUN_DIR nor MASTER_ADDR/MASTER_PORT).
absl::StatusOr<std::optional<RankEnvironment>> RankEnvironmentFromEnv(const EnvLookup& getenv_fn);
absl::StatusOr<std::optional<RankEnvironment>> RankEnvironmentFromEnv();  // getenv

// The built-in launcher (--nproc-per-node N > 1 forks N ranks) and an external launcher
// (torchrun, srun: one process per rank) must not both claim the job. Refuses, naming
// both and the fix (InvalidArgument), when nproc_per_node > 1 and the environment
// announces a world size > 1 (WORLD_SIZE, else SLURM_NTASKS, as the world size is read
// for the config) -- unless no variable gives this process a rank (RANK, SLURM_PROCID)
// and that size equals nproc_per_node * nnodes: an allocation sized for the built-in
// launcher, such as an `salloc -n 4` shell. A world size of 1 never conflicts
// (`srun -n1 trainer --nproc-per-node 4` keeps running as it does).
absl::Status CheckLauncherAgreement(int nproc_per_node, int nnodes, const EnvLookup& getenv_fn);
absl::Status CheckLauncherAgreement(int nproc_per_node, int nnodes);  // getenv

// "rank 3 of 8 (local rank 1), rendezvous in /tmp/x, job SLURM_JOB_ID=7" for logs.
std::string DescribeRankEnvironment(const RankEnvironment& env);

}  // namespace conveyor

#endif  // CONVEYOR_PARALLEL_RANK_ENVIRONMENT_H_
