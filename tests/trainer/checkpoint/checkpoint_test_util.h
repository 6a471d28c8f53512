// Helpers for the checkpoint tests: local shards whose values are a known function of
// (tensor name, global index), so any load can be checked element by element.
#ifndef CONVEYOR_TESTS_TRAINER_CHECKPOINT_CHECKPOINT_TEST_UTIL_H_
#define CONVEYOR_TESTS_TRAINER_CHECKPOINT_CHECKPOINT_TEST_UTIL_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainer/checkpoint/checkpoint_types.h"
#include "trainer/checkpoint/checkpoint_writer.h"
#include "trainer/checkpoint/index_runs.h"

namespace conveyor {

// Readable runs in gtest messages.
void PrintTo(const IndexRun& run, std::ostream* os);

namespace testing_util {

// Global indices of `runs`, in local order.
std::vector<int64_t> ExpandRuns(const std::vector<IndexRun>& runs);

// The value every test stores at global index `g` of tensor `name`: exact in fp32 and
// different across tensors.
float GlobalValue(const std::string& name, int64_t g);

// A local buffer holding `runs` of a tensor.
struct LocalShard {
  std::string name;
  std::vector<int64_t> global_shape;
  std::vector<IndexRun> runs;
  std::vector<float> data;

  TensorShardRef Ref();
};

// Filled with GlobalValue, to save.
LocalShard FilledShard(const std::string& name, std::vector<int64_t> shape,
                       std::vector<IndexRun> runs);
// Filled with a sentinel NaN, to load into.
LocalShard EmptyShard(const std::string& name, std::vector<int64_t> shape,
                      std::vector<IndexRun> runs);
// Number of elements of `shard` that differ from GlobalValue (0: loaded right).
int64_t CountWrong(const LocalShard& shard);

std::vector<TensorShardRef> Refs(std::vector<LocalShard>& shards);

// Runs of TP-style shard `index` of `parts` along `dim` (one range), and of SwiGLU's
// fc1 ([2F, H] split as the gate half and the up half, each in `parts` blocks).
std::vector<IndexRun> BlockRuns(const std::vector<int64_t>& shape, int dim, int parts, int index);
std::vector<IndexRun> SwigluRuns(const std::vector<int64_t>& shape, int parts, int index);

// A CheckpointState that holds only `iteration`.
CheckpointState StateAt(int64_t iteration);

// Saves, as one rank, a checkpoint of `iteration` holding one tensor "w" of `elements`
// values: GlobalValue's plus `iteration`, so that checkpoints of different iterations
// differ.
// `guard` is the commit's (checkpoint_writer.h).
absl::Status SaveOneTensorCheckpoint(const std::string& dir, int64_t iteration,
                                     int64_t elements = 16, CommitGuard guard = {});

// The same checkpoint snapshotted and written, then "crashed" before its commit: the
// files are all there, under the temporary name, whose path it returns.
absl::StatusOr<std::string> LeaveInterruptedSave(const std::string& dir, int64_t iteration,
                                                 int64_t elements = 16);

}  // namespace testing_util
}  // namespace conveyor

#endif  // CONVEYOR_TESTS_TRAINER_CHECKPOINT_CHECKPOINT_TEST_UTIL_H_
