#include "trainer/checkpoint/save_folder.h"

#include <unistd.h>

#include <cstdint>
#include <random>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/atomic_file.h"
#include "base/status_macros.h"
#include "trainer/checkpoint/checkpoint_reader.h"
#include "trainer/checkpoint/checkpoint_writer.h"
#include "trainer/checkpoint/format.h"

namespace conveyor {
namespace {

// "pid 1234 on host node7, since 2025-01-02 03:04:05 UTC, claim 0123456789abcdef":
// what the lock file says. The claim is 64 random bits, so that two runs that both
// believe they hold the lock (pids and hosts may coincide across containers) differ.
std::string ClaimLine() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  std::random_device device;
  const uint64_t claim = (static_cast<uint64_t>(device()) << 32) ^ device() ^
                         static_cast<uint64_t>(absl::ToUnixNanos(absl::Now()));
  return absl::StrFormat(
      "pid %d on host %s, since %s, claim %016x\n", getpid(), host[0] != '\0' ? host : "(unknown)",
      absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", absl::Now(), absl::UTCTimeZone()), claim);
}

// The holder named by the lock file at `path`, or "" when it is unreadable or empty.
std::string HolderAt(const std::string& path) {
  const absl::StatusOr<std::string> holder = ReadSmallFile(path);
  return holder.ok() ? std::string(absl::StripAsciiWhitespace(*holder)) : "";
}

// What --save holds, for the refusal: "latest iteration 12", ...
std::string DescribeCheckpoints(const std::string& save_dir, const CheckpointFolderSurvey& survey) {
  const absl::StatusOr<int64_t> latest = ReadLatestIteration(save_dir);
  if (latest.ok()) return absl::StrFormat("latest iteration %d", *latest);
  if (!survey.committed_iterations.empty()) {
    return absl::StrFormat("iterations %s, no readable %s",
                           absl::StrJoin(survey.committed_iterations, ", "), kLatestFileName);
  }
  return absl::StrCat("a ", kLatestFileName, " that names no iteration");
}

// Why a run that does not continue --save's checkpoints is another run.
std::string DescribeOrigin(const RunOrigin& origin) {
  if (origin.load_dir.empty()) return "this run starts from scratch (no --load)";
  if (!origin.loaded_iteration.has_value()) {
    return absl::StrFormat("this run starts from scratch (--load %s holds no checkpoint)",
                           origin.load_dir);
  }
  if (origin.finetune) {
    return absl::StrFormat("--finetune restarts at iteration 0 (from --load %s)", origin.load_dir);
  }
  return absl::StrFormat("this run resumes from --load %s (iteration %d), another folder",
                         origin.load_dir, *origin.loaded_iteration);
}

}  // namespace

absl::StatusOr<SaveFolderLock> SaveFolderLock::Acquire(const std::string& save_dir) {
  const bool created_dir = !PathExists(save_dir);
  RETURN_IF_ERROR(MakeDirs(save_dir));
  const std::string path = JoinPath(save_dir, kSaveLockFileName);
  absl::StatusOr<FileLock> lock = FileLock::TryAcquire(path);
  if (absl::IsUnavailable(lock.status())) {
    // The holder may not have written its line yet: then the message has none.
    const std::string who = HolderAt(path);
    return absl::UnavailableError(absl::StrFormat(
        "--save %s is in use by another run (%s%s holds its lock %s); two runs saving into one "
        "folder overwrite each other's checkpoints, so this one stops (nothing was trained or "
        "changed). Wait for that run to end or stop it, or choose another --save folder",
        save_dir, who.empty() ? "a process that has not named itself yet" : who,
        who.empty() ? "" : ",", path));
  }
  if (absl::IsFailedPrecondition(lock.status())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--save ", save_dir, ": ", lock.status().message(),
        ". Without a lock two runs could save into it and overwrite each other's checkpoints, "
        "so this one stops (nothing was trained or changed): choose a --save folder on a file "
        "system with locks (a local disk, NFS with lockd running, Lustre mounted -o flock)"));
  }
  RETURN_IF_ERROR(lock.status());
  std::string claim_line = ClaimLine();
  RETURN_IF_ERROR(lock->Write(claim_line));
  return SaveFolderLock(*std::move(lock), save_dir, created_dir, std::move(claim_line));
}

absl::Status SaveFolderLock::VerifyOwnership() const {
  const absl::Status still_named = lock_->CheckStillNamed();
  if (still_named.ok()) {
    const absl::StatusOr<std::string> now = ReadSmallFile(lock_->path());
    if (now.ok() && *now == claim_line_) return absl::OkStatus();
  }
  return absl::AbortedError(absl::StrCat(
      "--save ", dir_, " is no longer this run's: ", WhyLost(still_named),
      ". Two runs saving into one folder overwrite each other's checkpoints, so this run stops "
      "without writing (its committed checkpoints stay as they are); this run's lock claim was \"",
      absl::StripAsciiWhitespace(claim_line_), "\""));
}

std::string SaveFolderLock::WhyLost(const absl::Status& still_named) const {
  const std::string path = lock_->path();
  if (absl::IsNotFound(still_named)) {
    if (!IsDirectory(dir_)) {
      return "the folder was moved or deleted while the run was training";
    }
    return absl::StrCat("its lock file ", path,
                        " was removed while the run was training (a tmp cleaner, rm -rf?), so "
                        "another run could take the folder");
  }
  const std::string holder = HolderAt(path);
  const std::string who = holder.empty() ? "a process that has not named itself yet" : holder;
  if (!still_named.ok()) {
    return absl::StrCat("its lock file ", path, " was replaced and another run claimed it (", who,
                        ")");
  }
  return absl::StrCat("another run claimed its lock file ", path, " (", who,
                      "): the file system's locks hold only on one host (NFS mounted with "
                      "local_lock, or a run on another node), so both runs took the lock");
}

SaveFolderLock::SaveFolderLock(SaveFolderLock&& other) noexcept
    : lock_(std::move(other.lock_)),
      dir_(std::move(other.dir_)),
      created_dir_(std::exchange(other.created_dir_, false)),
      claim_line_(std::move(other.claim_line_)) {}

SaveFolderLock::~SaveFolderLock() {
  lock_.reset();
  // Fails, as it should, once the folder holds anything (a checkpoint, another lock).
  if (created_dir_) rmdir(dir_.c_str());
}

absl::StatusOr<SaveFolderClaim> ClaimSaveFolder(const std::string& save_dir,
                                                const RunOrigin& origin, bool overwrite) {
  ASSIGN_OR_RETURN(const CheckpointFolderSurvey survey, SurveyCheckpointFolder(save_dir));
  // --ckpt-step may rewind within the folder: that is still the folder's own run.
  const bool continues = origin.loaded_iteration.has_value() && !origin.finetune &&
                         SameFile(origin.load_dir, save_dir);
  if (!survey.holds_no_checkpoint() && !continues && !overwrite) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "--save %s holds another run's checkpoints (%s) and %s: its saves would replace "
        "checkpoints of that run and move %s, mixing two runs, so it stops (nothing was trained "
        "or changed). To resume that run, pass --load %s; to keep it, choose another --save "
        "folder; to save over it, pass --overwrite-save",
        save_dir, DescribeCheckpoints(save_dir, survey), DescribeOrigin(origin), kLatestFileName,
        save_dir));
  }
  SaveFolderClaim claim;
  ASSIGN_OR_RETURN(claim.removed, RemoveInterruptedSaves(save_dir));
  if (!continues) claim.overwritten = survey.committed_iterations;
  return claim;
}

absl::StatusOr<std::vector<std::string>> RetireOverwrittenCheckpoints(
    const std::string& save_dir, const std::vector<int64_t>& overwritten,
    const std::set<int64_t>& saved) {
  std::vector<std::string> retired;
  for (const int64_t iteration : overwritten) {
    const std::string name = IterationDirName(iteration);
    if (saved.count(iteration) > 0 || !PathExists(JoinPath(save_dir, name))) continue;
    const std::string aside = JoinPath(save_dir, TempDirName(iteration, "overwritten"));
    RETURN_IF_ERROR(Rename(JoinPath(save_dir, name), aside));
    RETURN_IF_ERROR(RemoveTree(aside));
    retired.push_back(name);
  }
  if (!retired.empty()) RETURN_IF_ERROR(SyncDir(save_dir));
  return retired;
}

}  // namespace conveyor
