// Where each global element of one stored tensor lives: the map a loader walks to fill
// a target shard of any layout, and the check that a tensor's shard records hold every
// element exactly once (run by rank 0 before it commits a save, and again on load).
#ifndef CONVEYOR_TRAINER_CHECKPOINT_TENSOR_INDEX_H_
#define CONVEYOR_TRAINER_CHECKPOINT_TENSOR_INDEX_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/checkpoint.pb.h"
#include "trainer/checkpoint/index_runs.h"

namespace conveyor {

class StoredTensorIndex {
 public:
  // Indexes `tensor`'s shard records. InvalidArgument naming the tensor (and the
  // writer ranks) when a record's runs are malformed or disagree with its byte
  // length, when two records hold the same element, or when some element is in none.
  static absl::StatusOr<StoredTensorIndex> Build(const TensorRecord& tensor);

  // Contiguous pieces of the target: `length` elements at element `record_offset` of
  // shard record `record` go to element `target_offset` of the target buffer.
  struct Piece {
    int record;
    int64_t record_offset;
    int64_t target_offset;
    int64_t length;
  };
  // The pieces that fill a target holding `target_runs` (validated against the
  // tensor's size by the caller), in target order.
  std::vector<Piece> Locate(const std::vector<IndexRun>& target_runs) const;

  int64_t numel() const { return numel_; }

 private:
  // A maximal contiguous block of one record. Sorted by global_start; they tile
  // [0, numel) without gaps or overlaps.
  struct Block {
    int64_t global_start;
    int64_t length;
    int record;
    int64_t record_offset;
  };
  std::vector<Block> blocks_;
  int64_t numel_ = 0;
};

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_CHECKPOINT_TENSOR_INDEX_H_
