// Building the training data on every rank of a job, in turns, so that each view of a
// --data-cache-path folder is written once and no rank waits on a file. The folder may
// be shared by every node, local to each node, or a rank's own (the README calls it a
// rank's own file view): which one it is, no rank can tell by its path. So the ranks
// take turns, each turn ended by a collective bounded by --distributed-timeout-minutes:
//   1. global rank 0 builds the indices (or loads them when its folder has them) and
//      writes what it built, as Megatron's rank 0 does;
//   2. each other node's first rank (LOCAL_RANK 0) does the same: it finds rank 0's
//      files when its node shares rank 0's folder, else builds its node's;
//   3. every other rank: it finds its node's files, or builds into its own folder.
// A rank whose build fails stops every rank at the end of its turn (named); the
// others' messages name it. Without --data-cache-path (or with mock data) every rank
// builds in memory at once and nothing waits.
#ifndef CONVEYOR_TRAINER_TRAINING_DATA_TURNS_H_
#define CONVEYOR_TRAINER_TRAINING_DATA_TURNS_H_

#include "absl/status/statusor.h"
#include "data/training_data.h"
#include "parallel/communicator.h"
#include "proto/config.pb.h"

namespace conveyor {

// A collective over `world` when --data-cache-path is given: every rank calls it.
// `local_rank` is this rank's LOCAL_RANK (its index among its node's ranks).
absl::StatusOr<DataSplits> BuildTrainingDataInTurns(const Config& resolved_config,
                                                    const SplitSampleCounts& counts,
                                                    Communicator& world, int local_rank);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_TRAINING_DATA_TURNS_H_
