// Loading a checkpoint into any layout: open the manifest of the latest (or a chosen)
// iteration, then fill each local shard the current run holds from whatever shards
// the saving run wrote, by global element index (docs/design.md §3).
//
// Loading needs no communication: every rank opens the checkpoint and reads the bytes
// its own shards need. Every stored shard record that is read is checked against its
// CRC32C before its data is used.
#ifndef CONVEYOR_TRAINER_CHECKPOINT_CHECKPOINT_READER_H_
#define CONVEYOR_TRAINER_CHECKPOINT_CHECKPOINT_READER_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/checkpoint.pb.h"
#include "trainer/checkpoint/checkpoint_types.h"
#include "trainer/checkpoint/tensor_index.h"

namespace conveyor {

// An opened, checked checkpoint: its manifest and an index of every tensor.
class LoadedCheckpoint {
 public:
  const std::string& directory() const { return directory_; }  // <load>/iter_NNNNNNN
  int64_t iteration() const { return manifest_.iteration(); }
  const Manifest& manifest() const { return manifest_; }

  // The saved state, with `rank`'s generator states (none when the saving run had no
  // such rank, e.g. after a layout change).
  CheckpointState State(int rank) const;

  // Null when the checkpoint has no such tensor (e.g. saved with --no-save-optim).
  const TensorRecord* FindTensor(absl::string_view name) const;
  std::vector<std::string> TensorNames() const;  // sorted

  // The tensor's record and element index; nullopt when the checkpoint lacks it.
  struct Entry {
    const TensorRecord* record;
    const StoredTensorIndex* index;
  };
  std::optional<Entry> Find(absl::string_view name) const;

  // OpenCheckpoint's work (below).
  static absl::StatusOr<LoadedCheckpoint> Open(const std::string& load_dir,
                                               std::optional<int64_t> iteration);

 private:
  LoadedCheckpoint() = default;
  absl::Status BuildIndex();
  absl::Status CheckDataFiles() const;

  struct Indexed {
    int tensor;  // in manifest_.tensors(); an index, not a pointer: moves keep it valid
    StoredTensorIndex index;
  };
  std::string directory_;
  Manifest manifest_;
  std::map<std::string, Indexed, std::less<>> tensors_;
};

// Opens <load_dir>/iter_NNNNNNN for `iteration`, or for the iteration
// latest_checkpointed_iteration.txt names when none is given (--ckpt-step). Folders
// of interrupted saves (*.tmp-*) are never considered.
//   NotFound:  no latest file, or the iteration's folder, manifest or a data file is
//              missing (named). Whether a run may then start from scratch is
//              SurveyCheckpointFolder's question, not this code's;
//   DataLoss:  the latest file, the manifest or a data file is corrupt or truncated,
//              or the manifest's shard records are inconsistent (named);
//   FailedPrecondition / Unimplemented: a newer format version or another dtype.
// Checks every data file's existence and size, not the data checksums (LoadTensors
// checks those for what it reads).
absl::StatusOr<LoadedCheckpoint> OpenCheckpoint(const std::string& load_dir,
                                                std::optional<int64_t> iteration);

// What a --load folder holds, found without opening any checkpoint. A run may start
// from scratch only when it holds nothing a later save could overwrite by mistake.
struct CheckpointFolderSurvey {
  bool exists = false;
  bool has_latest_file = false;               // latest_checkpointed_iteration.txt
  std::vector<int64_t> committed_iterations;  // iter_<digits> folders, ascending

  // No latest file and no committed iteration (leftovers of interrupted saves, *.tmp-*,
  // do not count: they were never a checkpoint).
  bool holds_no_checkpoint() const {
    return !has_latest_file && committed_iterations.empty();
  }
};

// Lists `load_dir`; a folder that does not exist is {exists = false}, not an error.
// FailedPrecondition when it is a file, not a folder, or when its newest checkpoint was
// written by Megatron-LM (named, with the route to --load-hf: megatron_folder.h); the
// listing's error (named) when it cannot be read.
absl::StatusOr<CheckpointFolderSurvey> SurveyCheckpointFolder(const std::string& load_dir);

// The newest of `survey`'s committed iterations, other than `except`, that
// OpenCheckpoint accepts, trying at most the `max_tries` newest of them; nullopt when
// none of those does. For messages that suggest what to load instead of a damaged
// checkpoint: it opens manifests and sizes data files but reads no tensor data, and
// `max_tries` bounds that work when every rank of a job looks at once.
std::optional<int64_t> NewestOpenableIteration(const std::string& load_dir,
                                               const CheckpointFolderSurvey& survey,
                                               std::optional<int64_t> except, int max_tries);

// Bytes read by LoadTensors, for bandwidth reports. Can exceed the targets' size:
// a stored record is read (and checksummed) whole even when a target needs part of it.
struct LoadStats {
  int64_t bytes_read = 0;
  int64_t records_read = 0;
  double seconds = 0;
};

// Fills every target from the checkpoint, whatever layout each was saved in.
//   NotFound naming the tensor when the checkpoint lacks it;
//   FailedPrecondition naming the tensor when its global shape differs;
//   InvalidArgument when a target's runs do not fit its shape or n;
//   DataLoss naming the file, byte range, tensor and writer rank, with the expected
//   and the found CRC32C, when stored bytes fail their checksum;
//   InvalidArgument naming the tensor when a loaded value is NaN or infinite
//   (finite_values.h).
// Targets may be partly written when an error is returned.
absl::Status LoadTensors(const LoadedCheckpoint& checkpoint,
                         const std::vector<TensorShardRef>& targets, LoadStats* stats = nullptr);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_CHECKPOINT_CHECKPOINT_READER_H_
