// --async-save: the slow part of a save (writing files) runs on a background thread
// while training goes on, with at most one save in flight.
//
//   saver.Start(state, shards, world);   // at a save step: snapshot, start writing
//   ... training steps ...
//   saver.Start(...);                    // next save: commits the previous one first
//   saver.Finish(world);                 // at exit: commit what is in flight
//
// Only the background thread touches the files of the save in flight, and it never
// uses the communicator: gloo and NCCL communicators must not be driven from two
// threads, so the collective steps (Snapshot, Commit) run inside Start and Finish, on
// the calling (training) thread. Start and Finish are collective: every rank calls
// them at the same points. A save is visible (iter folder and latest file) only
// after Finish, or the next Start, committed it.
#ifndef CONVEYOR_TRAINER_CHECKPOINT_ASYNC_SAVER_H_
#define CONVEYOR_TRAINER_CHECKPOINT_ASYNC_SAVER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "parallel/communicator.h"
#include "trainer/checkpoint/checkpoint_types.h"
#include "trainer/checkpoint/checkpoint_writer.h"

namespace conveyor {

class AsyncCheckpointSaver {
 public:
  // `guard` is every commit's (checkpoint_writer.h).
  explicit AsyncCheckpointSaver(std::string save_dir, CommitGuard guard = {});
  // Waits for a write in flight but cannot commit it (that needs the communicator):
  // call Finish first, or the save is abandoned as a *.tmp-* folder.
  ~AsyncCheckpointSaver();
  AsyncCheckpointSaver(const AsyncCheckpointSaver&) = delete;
  AsyncCheckpointSaver& operator=(const AsyncCheckpointSaver&) = delete;

  // Finishes the save in flight (returning its error, if any, without starting a new
  // one), copies `shards` (the caller may update them as soon as Start returns) and
  // starts writing them. Errors of the new save are reported by the Finish that
  // commits it, on every rank.
  absl::Status Start(const CheckpointState& state, const std::vector<TensorShardRef>& shards,
                     Communicator& world);
  // Waits for the write in flight and commits it; OK when nothing is in flight.
  absl::Status Finish(Communicator& world);

  bool in_flight() const { return writer_ != nullptr; }
  // Iteration of the save in flight (meaningful only when in_flight()).
  int64_t in_flight_iteration() const;
  // The last committed save's Write on this rank.
  const WriteStats& last_write_stats() const { return last_stats_; }

 private:
  std::string save_dir_;
  CommitGuard guard_;
  std::unique_ptr<CheckpointWriter> writer_;
  std::thread thread_;
  WriteStats last_stats_;
  // The host buffer of the last save, reused by the next one: the first save pays
  // for allocating and first-touching it, later snapshots are plain copies.
  std::unique_ptr<float[]> buffer_;
  int64_t buffer_capacity_ = 0;
};

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_CHECKPOINT_ASYNC_SAVER_H_
