#include "parallel/launcher.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace conveyor {
namespace {

// The signal the parent received and must forward; set from the handler.
volatile sig_atomic_t g_received_signal = 0;

void RecordSignal(int signo) { g_received_signal = signo; }

std::string DescribeStatus(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exited with code ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    std::string text = absl::StrFormat("was killed by signal %d (%s)", WTERMSIG(status),
                                       strsignal(WTERMSIG(status)));
    // The launcher's own SIGKILLs follow a failure already reported; a first rank to die
    // of SIGKILL was most often killed by the kernel, or by the cgroup, for its memory.
    if (WTERMSIG(status) == SIGKILL) {
      absl::StrAppend(&text,
                      ", perhaps for lack of memory (the kernel's OOM killer, or the job's "
                      "cgroup memory limit): look for \"Out of memory\" or \"oom-kill\" in "
                      "`dmesg` or `journalctl -k`, and check the job's memory limit");
    }
    return text;
  }
  return absl::StrCat("stopped with wait status ", status);
}

// What the launcher returns for a failed rank, the shell's convention.
int ExitCodeOf(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

bool Succeeded(int status) { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

[[noreturn]] void RunChild(const RankEnvironment& env, pid_t parent,
                           const std::function<int(const RankEnvironment&)>& rank_main) {
  // Die with the launcher, even if it is SIGKILLed; the check closes the race with a
  // parent that died before prctl.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(1);
  ::signal(SIGINT, SIG_DFL);
  ::signal(SIGTERM, SIG_DFL);

  // Code that reads the environment (RankEnvironmentFromEnv) sees the same rank.
  ::setenv("RANK", absl::StrCat(env.rank).c_str(), 1);
  ::setenv("WORLD_SIZE", absl::StrCat(env.world_size).c_str(), 1);
  ::setenv("LOCAL_RANK", absl::StrCat(env.local_rank).c_str(), 1);
  ::setenv("LOCAL_WORLD_SIZE", absl::StrCat(env.world_size).c_str(), 1);
  ::setenv(kRunDirEnv, env.run_dir.c_str(), 1);

  int code = 1;
  try {
    code = rank_main(env);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: uncaught exception: %s\n", env.rank, e.what());
  } catch (...) {
    std::fprintf(stderr, "rank %d: uncaught exception\n", env.rank);
  }
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  // _exit keeps only the low 8 bits: 256 must not turn into success.
  ::_exit(code == 0 ? 0 : ((code & 0xff) == 0 ? 1 : code & 0xff));
}

// Installs the forwarding handlers for the launcher's lifetime, restores them after.
class SignalForwarding {
 public:
  SignalForwarding() {
    g_received_signal = 0;
    struct sigaction action = {};
    action.sa_handler = RecordSignal;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGINT, &action, &old_int_);
    ::sigaction(SIGTERM, &action, &old_term_);
  }
  ~SignalForwarding() {
    ::sigaction(SIGINT, &old_int_, nullptr);
    ::sigaction(SIGTERM, &old_term_, nullptr);
  }

 private:
  struct sigaction old_int_;
  struct sigaction old_term_;
};

std::string MakeRunDir(const LaunchOptions& options, std::string* error) {
  std::string parent = options.run_dir_parent;
  if (parent.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    parent = (tmp != nullptr && tmp[0] != '\0') ? tmp : "/tmp";
  }
  std::string pattern = parent + "/conveyor-run-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) {
    *error =
        absl::StrFormat("cannot create a run directory in %s: %s", parent, std::strerror(errno));
    return "";
  }
  return pattern;
}

// The launcher's ranks while they run: which are alive, the result so far, and whether
// they are being stopped (after a failure or a signal; SIGKILL once the grace is over).
class RankSupervisor {
 public:
  RankSupervisor(int nproc, const LaunchOptions& options, std::ostream& err)
      : pids_(nproc, -1), options_(options), err_(err) {}

  // Forks one child per rank; a failed fork stops the ranks already started.
  void Start(const std::string& run_dir,
             const std::function<int(const RankEnvironment&)>& rank_main) {
    const pid_t parent = ::getpid();
    const int nproc = static_cast<int>(pids_.size());
    for (int r = 0; r < nproc; ++r) {
      const pid_t pid = ::fork();
      if (pid == 0) {
        RankEnvironment env;
        env.rank = r;
        env.world_size = nproc;
        env.local_rank = r;
        env.run_dir = run_dir;
        RunChild(env, parent, rank_main);
      }
      if (pid < 0) {
        err_ << "launcher: cannot start rank " << r << ": fork: " << std::strerror(errno)
             << "\n";
        result_ = 1;
        BeginStopping(SIGTERM);
        return;
      }
      pids_[r] = pid;
      ++alive_;
    }
  }

  // Until every rank is reaped: reaps them, stops the others after the first failure,
  // forwards signals, and kills what outlives the grace. Returns the launcher's code.
  int Wait() {
    while (alive_ > 0) {
      ReapFinished();
      HandleSignal();
      if (stopping_ && absl::Now() >= kill_at_) {
        StopAll(SIGKILL);
        kill_at_ = absl::InfiniteFuture();
      }
      if (alive_ > 0) ::usleep(5000);
    }
    return result_;
  }

 private:
  void StopAll(int signo) {
    for (pid_t pid : pids_) {
      if (pid > 0) ::kill(pid, signo);
    }
  }

  void BeginStopping(int signo) {
    stopping_ = true;
    StopAll(signo);
    kill_at_ = absl::Now() + options_.kill_grace;
  }

  void ReapFinished() {
    for (size_t r = 0; r < pids_.size(); ++r) {
      if (pids_[r] <= 0) continue;
      int status = 0;
      const pid_t done = ::waitpid(pids_[r], &status, WNOHANG);
      if (done != pids_[r]) continue;
      const pid_t pid = pids_[r];
      pids_[r] = -1;
      --alive_;
      // Only the first failure is reported: the others are its consequences (peers
      // that lost their connection, or the SIGTERM sent here).
      if (!stopping_ && !Succeeded(status)) {
        result_ = ExitCodeOf(status);
        err_ << "launcher: rank " << r << " (pid " << pid << ") " << DescribeStatus(status)
             << "; stopping the other " << alive_ << " rank" << (alive_ == 1 ? "" : "s") << "\n";
        err_.flush();
        BeginStopping(SIGTERM);
      }
    }
  }

  // A SIGINT or SIGTERM the launcher received: forwarded once to ranks that handle it
  // themselves; otherwise the ranks are stopped, and a second one kills them.
  void HandleSignal() {
    const int received = g_received_signal;
    if (received == 0) return;
    g_received_signal = 0;
    if (options_.ranks_handle_signals && !forwarded_once_) {
      forwarded_once_ = true;
      StopAll(received);  // no deadline: the ranks save and exit on their own
    } else if (!stopping_) {
      result_ = 128 + received;
      err_ << "launcher: received " << strsignal(received) << "; stopping " << alive_ << " rank"
           << (alive_ == 1 ? "" : "s") << "\n";
      err_.flush();
      BeginStopping(received);
    } else {
      // A second Ctrl-C means now.
      StopAll(SIGKILL);
    }
  }

  std::vector<pid_t> pids_;  // -1 once reaped (or never started)
  int alive_ = 0;
  int result_ = 0;
  bool stopping_ = false;
  absl::Time kill_at_ = absl::InfiniteFuture();
  bool forwarded_once_ = false;
  const LaunchOptions& options_;
  std::ostream& err_;
};

}  // namespace

int LaunchLocalRanks(int nproc, const std::function<int(const RankEnvironment&)>& rank_main,
                     std::ostream& err) {
  return LaunchLocalRanks(nproc, rank_main, err, LaunchOptions());
}

int LaunchLocalRanks(int nproc, const std::function<int(const RankEnvironment&)>& rank_main,
                     std::ostream& err, const LaunchOptions& options) {
  if (nproc < 1) {
    err << "launcher: --nproc-per-node must be at least 1, got " << nproc << "\n";
    return 1;
  }
  std::string error;
  const std::string run_dir = MakeRunDir(options, &error);
  if (run_dir.empty()) {
    err << "launcher: " << error << "\n";
    return 1;
  }

  SignalForwarding forwarding;
  // Anything still buffered would otherwise be printed once by every child.
  err.flush();
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);

  RankSupervisor ranks(nproc, options, err);
  ranks.Start(run_dir, rank_main);
  const int result = ranks.Wait();
  if (!options.keep_run_dir) {
    std::error_code ignored;
    std::filesystem::remove_all(run_dir, ignored);
  }
  return result;
}

}  // namespace conveyor
