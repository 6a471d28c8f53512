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

  const pid_t parent = ::getpid();
  std::vector<pid_t> pids(nproc, -1);  // -1 once reaped (or never started)
  int alive = 0;
  int result = 0;
  bool stopping = false;
  absl::Time kill_at = absl::InfiniteFuture();
  bool forwarded_once = false;
  auto stop_all = [&](int signo) {
    for (pid_t pid : pids) {
      if (pid > 0) ::kill(pid, signo);
    }
  };
  auto begin_stopping = [&](int signo) {
    stopping = true;
    stop_all(signo);
    kill_at = absl::Now() + options.kill_grace;
  };

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
      err << "launcher: cannot start rank " << r << ": fork: " << std::strerror(errno) << "\n";
      result = 1;
      begin_stopping(SIGTERM);
      break;
    }
    pids[r] = pid;
    ++alive;
  }

  while (alive > 0) {
    for (int r = 0; r < nproc; ++r) {
      if (pids[r] <= 0) continue;
      int status = 0;
      const pid_t done = ::waitpid(pids[r], &status, WNOHANG);
      if (done != pids[r]) continue;
      const pid_t pid = pids[r];
      pids[r] = -1;
      --alive;
      // Only the first failure is reported: the others are its consequences (peers
      // that lost their connection, or the SIGTERM sent here).
      if (!stopping && !Succeeded(status)) {
        result = ExitCodeOf(status);
        err << "launcher: rank " << r << " (pid " << pid << ") " << DescribeStatus(status)
            << "; stopping the other " << alive << " rank" << (alive == 1 ? "" : "s") << "\n";
        err.flush();
        begin_stopping(SIGTERM);
      }
    }
    const int received = g_received_signal;
    if (received != 0 && options.ranks_handle_signals && !forwarded_once) {
      g_received_signal = 0;
      forwarded_once = true;
      stop_all(received);  // no deadline: the ranks save and exit on their own
    } else if (received != 0) {
      g_received_signal = 0;
      if (!stopping) {
        result = 128 + received;
        err << "launcher: received " << strsignal(received) << "; stopping " << alive << " rank"
            << (alive == 1 ? "" : "s") << "\n";
        err.flush();
        begin_stopping(received);
      } else {
        // A second Ctrl-C means now.
        stop_all(SIGKILL);
      }
    }
    if (stopping && absl::Now() >= kill_at) {
      stop_all(SIGKILL);
      kill_at = absl::InfiniteFuture();
    }
    if (alive > 0) ::usleep(5000);
  }

  if (!options.keep_run_dir) {
    std::error_code ignored;
    std::filesystem::remove_all(run_dir, ignored);
  }
  return result;
}

}  // namespace conveyor
