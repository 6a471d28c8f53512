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
#ifndef CONVEYOR_TRAINER_CHECKPOINT_SAVE_FOLDER_H_
#define CONVEYOR_TRAINER_CHECKPOINT_SAVE_FOLDER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "trainer/checkpoint/file_io.h"

namespace conveyor {

class SaveFolderLock {
 public:
  // Creates `save_dir` (and its parents) when missing and takes its lock without
  // waiting, recording this process (pid, host, time) in the lock file for the
  // message another run gets. Unavailable, naming the folder, the holder and what
  // to do, when another process holds it; the failing call's error otherwise
  // (FailedPrecondition when `save_dir` is a file, ...).
  static absl::StatusOr<SaveFolderLock> Acquire(const std::string& save_dir);
  SaveFolderLock(SaveFolderLock&& other) noexcept;
  SaveFolderLock& operator=(SaveFolderLock&&) = delete;
  SaveFolderLock(const SaveFolderLock&) = delete;
  // Removes the lock file, and the folder when Acquire created it and it is still
  // empty (a run that stopped before saving leaves nothing behind), then releases.
  ~SaveFolderLock();

 private:
  SaveFolderLock(FileLock lock, std::string dir, bool created_dir)
      : lock_(std::move(lock)), dir_(std::move(dir)), created_dir_(created_dir) {}
  std::optional<FileLock> lock_;  // on <dir>/.conveyor-save.lock; reset first on release
  std::string dir_;
  bool created_dir_;
};

// Where a run starts, as far as the checkpoints already in its --save are concerned.
struct RunOrigin {
  std::string load_dir;                     // --load; "" without one
  std::optional<int64_t> loaded_iteration;  // the checkpoint it loaded; nullopt: none
  bool finetune = false;                    // --finetune: restarts at iteration 0
};

// Call with `save_dir`'s lock held. A folder holding committed checkpoints (a latest
// file or an iter_NNNNNNN folder) is this run's only when the run resumes from a
// checkpoint of that very folder (--load names it, without --finetune; --ckpt-step
// may pick an older iteration): otherwise FailedPrecondition naming the folder, its
// latest iteration, why this run is another one, and the choices (--load it to
// resume, another --save, or --overwrite-save), with nothing changed. `overwrite`
// (--overwrite-save) accepts any folder. Then removes the leftovers of interrupted
// saves (RemoveInterruptedSaves) and returns their names.
absl::StatusOr<std::vector<std::string>> ClaimSaveFolder(const std::string& save_dir,
                                                         const RunOrigin& origin, bool overwrite);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_CHECKPOINT_SAVE_FOLDER_H_
