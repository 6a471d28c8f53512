// Which global elements a local buffer holds, in local order, as compact runs of
// global flat indices (the row-major index into the single-rank model's tensor).
//
// This is the one vocabulary of the checkpoint format: a TP shard, SwiGLU's two-range
// fc1 shard, a pipeline stage's whole tensor and the distributed optimizer's slice of
// a parameter are all a list of runs, so saving and loading never special-case a
// layout. Runs mirror the RunRecord message of proto/checkpoint.proto.
#ifndef CONVEYOR_TRAINER_CHECKPOINT_INDEX_RUNS_H_
#define CONVEYOR_TRAINER_CHECKPOINT_INDEX_RUNS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "proto/checkpoint.pb.h"

namespace conveyor {

// `count` blocks of `length` consecutive indices; block c starts at
// start + c * stride. The strided form keeps a row-parallel shard (one block per row)
// to one run instead of thousands.
struct IndexRun {
  int64_t start = 0;
  int64_t length = 0;
  int64_t count = 1;
  int64_t stride = 0;

  int64_t elements() const { return length * count; }
  bool operator==(const IndexRun& o) const {
    return start == o.start && length == o.length && count == o.count &&
           (count == 1 || stride == o.stride);
  }
};

// Sum of elements() over the runs.
int64_t CountElements(const std::vector<IndexRun>& runs);

// Appends the block [start, start + length) after the ones `runs` describes, merging
// it into the last run when it extends it (contiguously or with the same stride).
void AppendBlock(std::vector<IndexRun>* runs, int64_t start, int64_t length);

// The compact runs of an explicit list of global indices (e.g. GlobalIndices(p)).
std::vector<IndexRun> RunsFromGlobalIndices(const std::vector<int64_t>& indices);

// Elements [start, start + length) of a tensor's flat index space: a flat shard,
// such as the distributed optimizer's part of one parameter.
std::vector<IndexRun> ElementRange(int64_t start, int64_t length);

// The runs of local elements [begin, end) of a buffer described by `runs`: e.g. the
// part of a (TP-sharded) parameter that falls in a distributed-optimizer rank's slice
// of the flat buffer, as global indices.
std::vector<IndexRun> SliceRuns(const std::vector<IndexRun>& runs, int64_t begin, int64_t end);

// Calls fn(global_start, length, local_offset) for every block, in local order.
template <typename Fn>
void ForEachBlock(const std::vector<IndexRun>& runs, Fn fn) {
  int64_t local = 0;
  for (const IndexRun& run : runs) {
    for (int64_t c = 0; c < run.count; ++c) {
      fn(run.start + c * run.stride, run.length, local);
      local += run.length;
    }
  }
}

// OK when every run is well formed (length >= 0, count >= 1, blocks of a strided run
// in increasing order without overlap) and inside [0, numel). `what` names the
// tensor in the message.
absl::Status ValidateRuns(const std::vector<IndexRun>& runs, int64_t numel,
                          const std::string& what);

// Product of the dimensions; 1 for a scalar (rank 0).
int64_t NumElements(const std::vector<int64_t>& shape);
// "[4, 8]" for messages.
std::string FormatShape(const std::vector<int64_t>& shape);

// Conversions to and from the manifest's messages.
void RunsToProto(const std::vector<IndexRun>& runs,
                 google::protobuf::RepeatedPtrField<RunRecord>* out);
std::vector<IndexRun> RunsFromProto(const google::protobuf::RepeatedPtrField<RunRecord>& runs);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_CHECKPOINT_INDEX_RUNS_H_
