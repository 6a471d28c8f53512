// The built-in launcher (`trainer --nproc-per-node N`): like torchrun on one node, it
// starts N ranks as processes and supervises them, so that one failing rank ends the
// whole job within seconds, with one line naming it, and no process outlives the job.
#ifndef CONVEYOR_PARALLEL_LAUNCHER_H_
#define CONVEYOR_PARALLEL_LAUNCHER_H_

#include <functional>
#include <ostream>
#include <string>

#include "absl/time/time.h"
#include "parallel/rank_environment.h"

namespace conveyor {

struct LaunchOptions {
  // After the first failure the other ranks get SIGTERM, then SIGKILL after this.
  absl::Duration kill_grace = absl::Seconds(3);
  // Parent of the fresh run directory; empty means $TMPDIR, else /tmp.
  std::string run_dir_parent;
  // Keep the run directory (rendezvous keys, progress boards) for debugging.
  bool keep_run_dir = false;
  // The ranks handle SIGINT/SIGTERM themselves (--exit-signal-handler: finish the step,
  // save, exit 0): a signal to the launcher is forwarded once and the ranks are given
  // all the time they need; the launcher's result is then theirs. A second signal
  // still kills them.
  bool ranks_handle_signals = false;
};

// Creates a fresh run directory, forks `nproc` children (no exec), and in child r
// calls rank_main with {rank r, world nproc, local rank r, run_dir} (also exported as
// RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE and CONVEYOR_RUN_DIR) and exits
// with its return value. Children die with the parent (PR_SET_PDEATHSIG); SIGINT and
// SIGTERM sent to the parent are forwarded to them.
//
// Returns 0 when every rank returns 0. When a rank exits non-zero or is killed by a
// signal, the others are stopped, exactly one line naming the failed rank is written
// to `err` (for SIGKILL, also that it may have run out of memory, and where to look),
// and the failed rank's exit code (128 + signal number when killed) is returned.
// Every child has been reaped on return. Children share the parent's
// stdout/stderr; flush buffered output before forking.
//
// Call from a single-threaded process (before creating threads or gloo/CUDA state):
// the children continue from fork() without exec.
int LaunchLocalRanks(int nproc, const std::function<int(const RankEnvironment&)>& rank_main,
                     std::ostream& err);
int LaunchLocalRanks(int nproc, const std::function<int(const RankEnvironment&)>& rank_main,
                     std::ostream& err, const LaunchOptions& options);

}  // namespace conveyor

#endif  // CONVEYOR_PARALLEL_LAUNCHER_H_
