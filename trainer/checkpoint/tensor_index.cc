#include "trainer/checkpoint/tensor_index.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace conveyor {
namespace {

std::string Writer(const ShardRecord& record) {
  return absl::StrCat("rank ", record.writer_rank(), " (", record.file(), ")");
}

}  // namespace

absl::StatusOr<StoredTensorIndex> StoredTensorIndex::Build(const TensorRecord& tensor) {
  StoredTensorIndex index;
  const std::vector<int64_t> shape(tensor.global_shape().begin(), tensor.global_shape().end());
  for (int64_t d : shape) {
    if (d < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor ", tensor.name(), " has a negative dimension in its shape ", FormatShape(shape)));
    }
  }
  index.numel_ = NumElements(shape);
  for (int r = 0; r < tensor.shards_size(); ++r) {
    const ShardRecord& record = tensor.shards(r);
    const std::vector<IndexRun> runs = RunsFromProto(record.runs());
    RETURN_IF_ERROR(
        ValidateRuns(runs, index.numel_,
                     absl::StrCat("tensor ", tensor.name(), " of shape ", FormatShape(shape),
                                  ", shard written by ", Writer(record))));
    const int64_t elements = CountElements(runs);
    if (record.byte_length() != elements * static_cast<int64_t>(sizeof(float))) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", tensor.name(), ", shard written by ", Writer(record), ": ",
                       elements, " fp32 elements need ", elements * sizeof(float),
                       " bytes but the record has ", record.byte_length()));
    }
    ForEachBlock(runs, [&](int64_t start, int64_t length, int64_t local) {
      if (length > 0) index.blocks_.push_back({start, length, r, local});
    });
  }
  std::sort(index.blocks_.begin(), index.blocks_.end(),
            [](const Block& a, const Block& b) { return a.global_start < b.global_start; });
  int64_t covered = 0;  // every element below this is held exactly once
  for (size_t i = 0; i < index.blocks_.size(); ++i) {
    const Block& b = index.blocks_[i];
    if (b.global_start < covered) {
      // The block that reaches furthest so far is the previous one (blocks tile).
      const Block& prev = index.blocks_[i - 1];
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor ", tensor.name(), ": global elements [", b.global_start, ", ",
          std::min(covered, b.global_start + b.length), ") are stored twice, by ",
          Writer(tensor.shards(prev.record)), " and by ", Writer(tensor.shards(b.record)),
          "; exactly one rank may save each element (replicas must pass their shards "
          "on one rank only)"));
    }
    if (b.global_start > covered) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor ", tensor.name(), " of shape ", FormatShape(shape), ": global elements [",
          covered, ", ", b.global_start, ") are stored by no rank"));
    }
    covered = b.global_start + b.length;
  }
  if (covered != index.numel_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor ", tensor.name(), " of shape ", FormatShape(shape), ": global elements [", covered,
        ", ", index.numel_, ") are stored by no rank"));
  }
  return index;
}

std::vector<StoredTensorIndex::Piece> StoredTensorIndex::Locate(
    const std::vector<IndexRun>& target_runs) const {
  std::vector<Piece> pieces;
  ForEachBlock(target_runs, [&](int64_t start, int64_t length, int64_t local) {
    // The stored block holding `start`: the last one starting at or before it.
    auto it =
        std::upper_bound(blocks_.begin(), blocks_.end(), start,
                         [](int64_t value, const Block& b) { return value < b.global_start; });
    --it;  // exists: blocks tile [0, numel) and start < numel
    int64_t done = 0;
    while (done < length) {
      const int64_t g = start + done;
      const int64_t take = std::min(length - done, it->global_start + it->length - g);
      Piece piece{it->record, it->record_offset + (g - it->global_start), local + done, take};
      // Merge with the previous piece when it continues it in both buffers.
      if (!pieces.empty()) {
        Piece& last = pieces.back();
        if (last.record == piece.record &&
            last.record_offset + last.length == piece.record_offset &&
            last.target_offset + last.length == piece.target_offset) {
          last.length += take;
          done += take;
          ++it;
          continue;
        }
      }
      pieces.push_back(piece);
      done += take;
      ++it;
    }
  });
  return pieces;
}

}  // namespace conveyor
