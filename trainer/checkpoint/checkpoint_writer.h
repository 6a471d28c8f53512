// Saving a checkpoint from every rank of a job, split into three steps so that the
// slow one can overlap training (--async-save):
//
//   Snapshot  main thread, collective: rank 0 picks the temporary folder's name, and
//             each rank captures its state and shards (copies them, for async saves).
//   Write     any one thread, no communication: writes this rank's data file
//             rank_RRRRR.bin and its manifest fragment into the temporary folder
//             <save>/iter_NNNNNNN.tmp-<nonce>/ and fsyncs them.
//   Commit    main thread, collective: the ranks agree that every Write succeeded;
//             rank 0 merges the fragments into manifest.pb, checks that every
//             element of every tensor is saved exactly once, renames the folder to
//             iter_NNNNNNN/ and then replaces latest_checkpointed_iteration.txt,
//             asking the commit guard (the --save lock's ownership check) right
//             before each of those two changes.
//
// Call the three steps on every rank, in order, even after one of them failed on
// some rank: the collective steps must stay matched across ranks. Errors travel to
// every rank at Commit, so all ranks return an error (this rank's own, or Aborted
// naming the ranks that failed) or all succeed.
//
// Who writes what: each element of each tensor must be passed by exactly one rank;
// replicas are passed by one of their holders only. The trainer's natural choice:
//   - parameters: data-parallel rank 0 of each (TP, PP) position; parameters that
//     are replicated over TP (norms, row-parallel biases) on TP rank 0 only; the last
//     stage's copy of a tied embedding never;
//   - optimizer state: with the distributed optimizer each DP rank its own slice
//     (as ElementRange runs of each parameter it touches); otherwise as parameters.
// Commit refuses a save where an element is passed twice or never, naming the
// tensor and ranks, so a wrong choice cannot produce an incomplete checkpoint.
//
// Crash safety: nothing under iter_NNNNNNN/ or the latest file changes until every
// rank's data is durable; a crash at any point leaves the previous checkpoint and the
// latest file intact (plus a *.tmp-* folder that loaders ignore).
//
// Every rank must see the same save folder (a shared file system across nodes). The
// folder must exist (the trainer creates it at start): a folder that disappears while
// the run trains was moved or deleted, and is not recreated (Aborted). Write asks the
// guard too, before it creates anything.
//
// Saving an iteration that exists already (a rerun after --ckpt-step, --overwrite-save)
// swaps the folders atomically where the file system can (renameat2 RENAME_EXCHANGE);
// where it cannot (NFS), the old folder is first renamed to iter_NNNNNNN.tmp-<nonce>-
// replaced, then the new one into place: a crash between the two renames leaves no
// iter_NNNNNNN, and RestoreInterruptedReplacements puts the old one back.
//
// Thread safety: one CheckpointWriter serves one save. Write may run on another
// thread than Snapshot and Commit, provided the caller orders them (e.g. joins the
// writing thread before Commit). The communicator is only used by Snapshot and
// Commit, so it stays on the thread that trains.
#ifndef CONVEYOR_TRAINER_CHECKPOINT_CHECKPOINT_WRITER_H_
#define CONVEYOR_TRAINER_CHECKPOINT_CHECKPOINT_WRITER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "parallel/communicator.h"
#include "proto/checkpoint.pb.h"
#include "trainer/checkpoint/checkpoint_types.h"

namespace conveyor {

enum class SnapshotMode {
  kCopy,    // copy the shards' data: the caller may change it once Snapshot returns
  kBorrow,  // keep pointers: the data must stay unchanged until Write returns
};

// Called by rank 0 right before a commit renames a save into place and again before
// it replaces the latest file; an error stops the commit there (nothing renamed, or
// the latest file left as it was). The trainer passes SaveFolderLock's ownership
// check. An empty guard allows every commit.
using CommitGuard = std::function<absl::Status()>;

// Bytes and seconds of one rank's Write, for bandwidth reports.
struct WriteStats {
  int64_t bytes = 0;  // shard data only
  double seconds = 0;
};

class CheckpointWriter {
 public:
  explicit CheckpointWriter(std::string save_dir, CommitGuard guard = {});
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // Step 1. Only communication errors and bad arguments (named with tensor and rank)
  // are returned; either way, go on with Write and Commit.
  absl::Status Snapshot(const CheckpointState& state, const std::vector<TensorShardRef>& shards,
                        Communicator& world, SnapshotMode mode);
  // Step 2. Returns the Snapshot error if there was one.
  absl::Status Write();
  // Step 3. OK on every rank when the checkpoint is committed.
  absl::Status Commit(Communicator& world);

  // kCopy's host buffer: a writer can be handed the previous save's buffer so that
  // saves after the first skip allocating (and first-touching) one. Optional; call
  // before Snapshot, and take it back after Commit.
  void AdoptBuffer(std::unique_ptr<float[]> buffer, int64_t capacity);
  std::unique_ptr<float[]> TakeBuffer(int64_t* capacity);

  int64_t iteration() const { return state_.iteration; }
  // <save>/iter_NNNNNNN.tmp-<nonce>, known after Snapshot.
  const std::string& temp_dir() const { return temp_dir_; }
  // <save>/iter_NNNNNNN, the name the checkpoint gets on Commit.
  std::string final_dir() const;
  const WriteStats& write_stats() const { return write_stats_; }

 private:
  struct PendingShard {
    std::string name;
    std::vector<int64_t> global_shape;
    std::vector<IndexRun> runs;
    const float* data;
    int64_t n;
  };

  absl::Status CaptureShards(const std::vector<TensorShardRef>& shards, SnapshotMode mode);
  absl::Status WriteFiles();
  // Rank 0's part of Commit: merge, check, write the manifest, rename, update latest.
  // Sets *renamed once the folder has its final name.
  absl::Status Publish(bool* renamed);
  // Rank 0: gives the merged, durable temporary folder its final name.
  absl::Status MoveIntoPlace(bool* renamed);
  std::string Where() const;  // "rank 3, checkpoint <save>/iter_0000100" for messages

  std::string save_dir_;
  CommitGuard guard_;
  int rank_ = 0;
  int world_size_ = 1;
  std::string nonce_;
  std::string temp_dir_;
  CheckpointState state_;
  std::vector<PendingShard> shards_;
  std::unique_ptr<float[]> copy_;  // kCopy: every shard's data back to back
  int64_t copy_capacity_ = 0;      // elements in copy_

  enum class Step { kNew, kSnapshotted, kWritten, kCommitted };
  Step step_ = Step::kNew;
  absl::Status snapshot_status_;
  absl::Status write_status_;
  WriteStats write_stats_;
};

// Snapshot (borrowing the data), Write and Commit on the calling thread: a blocking
// save. Collective over `world`, whose ranks must all call it.
absl::Status SaveCheckpoint(const std::string& save_dir, const CheckpointState& state,
                            const std::vector<TensorShardRef>& shards, Communicator& world,
                            CommitGuard guard = {});

// Checks, before any training, that `save_dir` can receive this rank's files: creates
// the folder (and its parents) when missing, then creates and removes an empty probe
// file named after `rank`. Cheap (no fsync); leaves nothing but the folder behind.
// FailedPrecondition when `save_dir` is a file; otherwise the failing call's error,
// naming the path (PermissionDenied for a read-only folder, ...).
absl::Status ProbeSaveFolder(const std::string& save_dir, int rank);

// Removes what interrupted saves left in `save_dir` (iter_NNNNNNN.tmp-* folders and
// temporary latest files) and returns their names. Loading ignores them anyway; this
// only reclaims the space. Call it on one rank, before the job's first save, and never
// while another job may be saving into the same folder: the trainer calls it through
// ClaimSaveFolder (save_folder.h), under the folder's lock.
absl::StatusOr<std::vector<std::string>> RemoveInterruptedSaves(const std::string& save_dir);

// Puts back the iterations that a crash left renamed aside in the middle of a
// replacement without atomic exchange (iter_NNNNNNN.tmp-<nonce>-replaced with no
// iter_NNNNNNN beside it), and returns their final names. Call it on one rank under
// the folder's lock, before anything loads from the folder.
absl::StatusOr<std::vector<std::string>> RestoreInterruptedReplacements(
    const std::string& save_dir);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_CHECKPOINT_CHECKPOINT_WRITER_H_
