// One run at a time per --save folder, and only the run the folder's checkpoints
// belong to:
//
//   SaveFolderLock   an advisory lock (flock(2) on <save>/.conveyor-save.lock) that the
//                    rank that commits holds from before it reads or changes the folder
//                    until its last commit. The kernel releases it when the process
//                    dies, so a crash never leaves the folder locked.
//   ClaimSaveFolder  under the lock: refuses a folder that holds another run's
//                    committed checkpoints (this run's saves would overwrite some of
//                    them and move latest_checkpointed_iteration.txt back, mixing two
//                    runs), then removes what interrupted saves left there.
//
// Two runs saving into one folder would each overwrite the other's checkpoints and
// latest file while both exit 0; the lock turns the second into an error at start.
// flock works across the nodes of NFS (Linux emulates it with POSIX locks there) and
// of Lustre mounted with -o flock; a file system without locks fails the Acquire.
//
// A lock can stop protecting while the run is alive: a tmp cleaner removes the lock
// file, the folder is moved or deleted, or the file system's locks hold only on one
// host (NFS mounted with local_lock, a node-local lock service), so a run on another
// node takes "the" lock too. So the lock file also carries a claim, a random nonce of
// this run, and the run checks before every commit (VerifyOwnership) that the name
// still leads to the file it locked and that the file still holds its claim. A run
// that lost the folder stops without writing and names whoever claimed it since.
#ifndef CONVEYOR_TRAINER_CHECKPOINT_SAVE_FOLDER_H_
#define CONVEYOR_TRAINER_CHECKPOINT_SAVE_FOLDER_H_

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "trainer/checkpoint/file_io.h"

namespace conveyor {

class SaveFolderLock {
 public:
  // Creates `save_dir` (and its parents) when missing and takes its lock without
  // waiting, recording this process (pid, host, time) and a fresh claim nonce in the
  // lock file for the message another run gets. Unavailable, naming the folder, the
  // holder and what to do, when another process holds it; FailedPrecondition naming
  // the folder's file system when it cannot lock at all; the failing call's error
  // otherwise (FailedPrecondition when `save_dir` is a file, ...).
  static absl::StatusOr<SaveFolderLock> Acquire(const std::string& save_dir);
  SaveFolderLock(SaveFolderLock&& other) noexcept;
  SaveFolderLock& operator=(SaveFolderLock&&) = delete;
  SaveFolderLock(const SaveFolderLock&) = delete;
  // Removes the lock file, and the folder when Acquire created it and it is still
  // empty (a run that stopped before saving leaves nothing behind), then releases.
  ~SaveFolderLock();

  // OK while this run still owns the folder: <dir>/.conveyor-save.lock is the file it
  // locked and holds its claim. Aborted otherwise, saying what happened (the folder
  // or the lock file is gone, another run claimed it, naming that run) and that the
  // run stops without writing. Reads one small file; call it before each commit.
  absl::Status VerifyOwnership() const;
  // What this run wrote into the lock file: "pid P on host H, since T, claim C\n".
  const std::string& claim_line() const { return claim_line_; }

 private:
  SaveFolderLock(FileLock lock, std::string dir, bool created_dir, std::string claim_line)
      : lock_(std::move(lock)),
        dir_(std::move(dir)),
        created_dir_(created_dir),
        claim_line_(std::move(claim_line)) {}
  // Why the folder is no longer this run's, from what its lock file's name leads to.
  std::string WhyLost(const absl::Status& still_named) const;

  std::optional<FileLock> lock_;  // on <dir>/.conveyor-save.lock; reset first on release
  std::string dir_;
  bool created_dir_;
  std::string claim_line_;
};

// Where a run starts, as far as the checkpoints already in its --save are concerned.
struct RunOrigin {
  std::string load_dir;                     // --load; "" without one
  std::optional<int64_t> loaded_iteration;  // the checkpoint it loaded; nullopt: none
  bool finetune = false;                    // --finetune: restarts at iteration 0
};

// What claiming a --save folder found and did.
struct SaveFolderClaim {
  // Leftovers of interrupted saves that were removed.
  std::vector<std::string> removed;
  // Another run's committed iterations, accepted only because of --overwrite-save:
  // once this run has committed a save of its own, RetireOverwrittenCheckpoints
  // removes those it did not replace, so that no later --ckpt-step resumes from them.
  std::vector<int64_t> overwritten;
};

// Call with `save_dir`'s lock held. A folder holding committed checkpoints (a latest
// file or an iter_NNNNNNN folder) is this run's only when the run resumes from a
// checkpoint of that very folder (--load names it, without --finetune; --ckpt-step
// may pick an older iteration): otherwise FailedPrecondition naming the folder, its
// latest iteration, why this run is another one, and the choices (--load it to
// resume, another --save, or --overwrite-save), with nothing changed. `overwrite`
// (--overwrite-save) accepts any folder. Then removes the leftovers of interrupted
// saves (RemoveInterruptedSaves).
absl::StatusOr<SaveFolderClaim> ClaimSaveFolder(const std::string& save_dir,
                                                const RunOrigin& origin, bool overwrite);

// Call with `save_dir`'s lock held, after this run's first commit: removes the
// committed iterations in `overwritten` that are not in `saved` (iterations this run
// saved, which replaced the other run's of the same number). Each is first renamed to
// a temporary name that loaders ignore, so a crash never leaves half a checkpoint
// under a committed name. Returns the removed folders' names.
absl::StatusOr<std::vector<std::string>> RetireOverwrittenCheckpoints(
    const std::string& save_dir, const std::vector<int64_t>& overwritten,
    const std::set<int64_t>& saved);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_CHECKPOINT_SAVE_FOLDER_H_
