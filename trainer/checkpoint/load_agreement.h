// Whether the ranks of a job may train on what each of them loaded. Every rank reads
// --load on its own: with a --load folder per node, or a node whose view of shared
// storage is stale, one rank can resume at iteration N while another starts from
// scratch, both without error, and the job would train on diverging weights. So,
// before training, the ranks compare what they loaded, and whether they failed.
//
// Both functions are collectives over the world group: every rank calls them, in the
// same order, whether its own work succeeded or not, and every rank reaches the same
// verdict (OK on all, or an error on all).
#ifndef CONVEYOR_TRAINER_CHECKPOINT_LOAD_AGREEMENT_H_
#define CONVEYOR_TRAINER_CHECKPOINT_LOAD_AGREEMENT_H_

#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "parallel/communicator.h"

namespace conveyor {

// The checkpoint one rank loaded, as far as the ranks compare it.
struct LoadedCheckpointId {
  std::optional<int64_t> iteration;  // nullopt: no checkpoint (training starts from scratch)
  int64_t consumed_samples = 0;      // the checkpoint's

  bool operator==(const LoadedCheckpointId& o) const {
    return iteration == o.iteration && consumed_samples == o.consumed_samples;
  }
  bool operator!=(const LoadedCheckpointId& o) const { return !(*this == o); }
};

// Every rank learns whether any rank failed `mine` (its attempt to `what`, e.g.
// "prepare --save"). Returns this rank's own error, else Aborted naming the ranks
// that failed (their own errors say why), else OK.
absl::Status AgreeAcrossRanks(Communicator& world, const absl::Status& mine,
                              absl::string_view what);

// As AgreeAcrossRanks for this rank's load of `load_dir` (its --load; "" without
// one), and then, when every rank loaded, FailedPrecondition on every rank unless all
// loaded the same checkpoint: the same iteration and consumed samples, and the same
// manifest (the CRC32C its envelope records, read again from
// <load_dir>/iter_NNNNNNN/manifest.pb: node-local copies of two runs' checkpoints of one
// iteration differ there). The error names what each group of ranks loaded, this
// rank's manifest, and the fix (every rank must see the same --load folder).
absl::Status AgreeOnLoadedCheckpoint(Communicator& world,
                                     const absl::StatusOr<LoadedCheckpointId>& mine,
                                     absl::string_view load_dir);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_CHECKPOINT_LOAD_AGREEMENT_H_
