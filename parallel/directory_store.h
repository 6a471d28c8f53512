// A key-value store in a directory shared by the ranks, used for rendezvous (gloo
// addresses, the NCCL unique id): one file per key. It replaces gloo's FileStore, which in Debian's
// gloo (git 2022-05-18) waits a fixed 30 s in get() whatever the group's timeout,
// measures timeouts in whole seconds, refuses to overwrite a key and cannot tell
// whether a key exists without blocking, which is what names a missing rank.
#ifndef CONVEYOR_PARALLEL_DIRECTORY_STORE_H_
#define CONVEYOR_PARALLEL_DIRECTORY_STORE_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "parallel/rendezvous_point.h"

namespace conveyor {

class DirectoryStore : public RendezvousStore {
 public:
  // Creates `dir` (and parents) if needed. `timeout` bounds get() and wait(keys).
  static absl::StatusOr<std::unique_ptr<DirectoryStore>> Open(const std::string& dir,
                                                              std::chrono::milliseconds timeout);

  void set(const std::string& key, const std::vector<char>& data) override;
  bool Has(const std::string& key) const override;
  const std::string& dir() const { return dir_; }

 protected:
  std::vector<char> Read(const std::string& key) override;

 private:
  DirectoryStore(std::string dir, std::chrono::milliseconds timeout);
  std::string PathOf(const std::string& key) const;

  std::string dir_;
};

// The rendezvous in a directory shared by the ranks: group `name` keeps its store in
// <dir>/<name> and its progress board in <dir>/<name>/.progress.
class DirectoryRendezvous : public RendezvousPoint {
 public:
  // Rendezvous directly in `dir`, which must be fresh (no keys of an earlier job).
  explicit DirectoryRendezvous(std::string dir) : dir_(std::move(dir)) {}

  // The rendezvous of one launch of `size` ranks in `run_dir` (CONVEYOR_RUN_DIR), which
  // may hold what earlier launches left (finished or killed): every rank calls this with
  // its global `rank`, and all get the same fresh subdirectory <run_dir>/<launch>, so
  // that nobody reads a key of an earlier launch. One launch at a time per run
  // directory and job: the launches of job `job_id` (RankEnvironment::job_id) before it
  // must have ended (finished or been killed); other jobs' launches meet apart.
  //
  // Why a handshake: a rank cannot tell a key of this launch from a stale one, and rank
  // 1 may start before rank 0. Global rank 0 names the launch (time, pid, random).
  // Every other rank r writes <handshake>/join_<r> holding a nonce of its own (pid,
  // random) and waits for ack_<r>_<nonce>, which only this launch's rank 0 can write; it
  // holds the launch's name and rank 0's world size. Rank 0 answers every join_<r> it
  // sees (a stale one costs a file) until each rank r has claimed <launch>/.joined/<r>
  // (created exclusively, holding r's world size), then clears the handshake folder:
  // nobody waits on its files any more. The handshake folder is <run_dir>/launch, or
  // <run_dir>/launch.<job_id> when the launcher names the job, so that the ranks of two
  // jobs sharing a run directory never meet.
  //
  // Each side waits at most `timeout`, then fails naming the ranks that never joined
  // (rank 0) or rank 0 (the others), run_dir and the fix. A second process claiming a
  // rank fails at once (AlreadyExists), when it sees its request replaced or removed or
  // finds the rank claimed. A rank whose world size differs from rank 0's fails once it
  // has claimed its place, and rank 0 when it reads the claim (FailedPrecondition, naming
  // both world sizes).
  static absl::StatusOr<std::unique_ptr<DirectoryRendezvous>> Join(const std::string& run_dir,
                                                                   int rank, int size,
                                                                   const std::string& job_id,
                                                                   absl::Duration timeout);

  const std::string& dir() const { return dir_; }

  std::string Describe() const override { return "directory " + dir_; }
  absl::StatusOr<std::unique_ptr<RendezvousStore>> OpenStore(const std::string& name,
                                                             absl::Duration timeout) const override;
  absl::StatusOr<std::unique_ptr<ProgressBoard>> OpenBoard(const std::string& name, int rank,
                                                           int size) const override;

 private:
  std::string GroupDir(const std::string& name) const;

  std::string dir_;
};

// Removes `dir` and everything in it (a finished launch's keys and boards). Call from one
// rank, once no rank needs them. On NFS, close the files in it first where possible: a
// file open on this client stays (as .nfsXXXX) until closed, so removal is retried for a
// second before it fails naming `dir`.
absl::Status RemoveRendezvousDirectory(const std::string& dir);

// A name for a temporary file that no other writer in a shared directory picks, not even
// a rank on another node whose pid and calls are this one's (containers): starts with
// '.' (which EncodeFileName never does), then host, pid and 64 random bits.
std::string TemporaryFileName();

// A file-system-safe name for `text` (percent-encodes all but [A-Za-z0-9_-[],] and
// interior dots), so group names such as "tp[0,1]" name directories as they are.
std::string EncodeFileName(const std::string& text);

}  // namespace conveyor

#endif  // CONVEYOR_PARALLEL_DIRECTORY_STORE_H_
