// Names and versions of the checkpoint layout on disk:
//
//   <save>/latest_checkpointed_iteration.txt   "100\n": the newest committed save
//   <save>/iter_0000100/manifest.pb             Manifest (proto/checkpoint.proto) in
//                                               an envelope (envelope.h)
//   <save>/iter_0000100/rank_00000.bin          shard data written by world rank 0
//   <save>/iter_0000100.tmp-1a2b3c4d5e6f/       a save in progress, or one a crash
//                                               interrupted: never read
//   <save>/iter_0000100.tmp-<nonce>-replaced/   the old iteration moved aside while
//                                               a re-save replaces it without atomic
//                                               exchange (checkpoint_writer.h)
//   <save>/.conveyor-save.lock                  while a run saves here: its lock
//                                               (save_folder.h), naming its process
#ifndef CONVEYOR_TRAINER_CHECKPOINT_FORMAT_H_
#define CONVEYOR_TRAINER_CHECKPOINT_FORMAT_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace conveyor {

// Manifest.format_version written today. Version 1: fp32 shards, CRC32C per record.
inline constexpr int kCheckpointFormatVersion = 1;

inline constexpr char kManifestFileName[] = "manifest.pb";
inline constexpr char kLatestFileName[] = "latest_checkpointed_iteration.txt";
inline constexpr char kSaveLockFileName[] = ".conveyor-save.lock";
inline constexpr char kReplacedSuffix[] = "-replaced";

// "iter_0000100": at least 7 digits, like Megatron.
std::string IterationDirName(int64_t iteration);
// Whether `name` is exactly iter_<digits> (a committed checkpoint's folder); sets
// `*iteration` when it is and `iteration` is not null.
bool ParseIterationDirName(const std::string& name, int64_t* iteration = nullptr);
// "iter_0000100.tmp-<nonce>".
std::string TempDirName(int64_t iteration, const std::string& nonce);
// "rank_00003.bin" and "rank_00003.fragment".
std::string DataFileName(int rank);
std::string FragmentFileName(int rank);

// The iteration <dir>/latest_checkpointed_iteration.txt names. NotFound when the
// file does not exist (no checkpoint yet); DataLoss naming the file and its contents
// when they are not a non-negative integer.
absl::StatusOr<int64_t> ReadLatestIteration(const std::string& dir);
// Replaces the latest file atomically: a temporary file is written and fsynced, then
// renamed over the old one, then the folder fsynced. `nonce` keeps concurrent
// writers' temporary names apart.
absl::Status WriteLatestIteration(const std::string& dir, int64_t iteration,
                                  const std::string& nonce);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_CHECKPOINT_FORMAT_H_
