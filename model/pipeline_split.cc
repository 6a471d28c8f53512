#include "model/pipeline_split.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace conveyor {
namespace {

absl::StatusOr<std::vector<int64_t>> UnevenSplit(const PipelineSplit& split, int64_t stages) {
  const int64_t layers = split.num_layers;
  const int64_t first = split.first_stage_layers;
  const int64_t last = split.last_stage_layers;
  if (stages != split.pipeline_ranks) {
    return absl::InvalidArgumentError(
        "--decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers do not work "
        "with --num-virtual-stages-per-pipeline-rank > 1: split the layers evenly or use one "
        "virtual stage per rank");
  }
  const int64_t middle = stages - (first > 0 ? 1 : 0) - (last > 0 ? 1 : 0);
  const int64_t rest = layers - first - last;
  if (rest < 0 || (middle == 0 ? rest != 0 : rest % middle != 0)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--num-layers %d minus --decoder-first-pipeline-num-layers %d and "
        "--decoder-last-pipeline-num-layers %d leaves %d layers for the %d other stages of "
        "--pipeline-model-parallel-size %d: the remaining layers must split evenly over the "
        "other stages",
        layers, first, last, rest, middle, stages));
  }
  std::vector<int64_t> counts(stages, middle == 0 ? 0 : rest / middle);
  if (first > 0) counts.front() = first;
  if (last > 0) counts.back() = last;
  return counts;
}

absl::StatusOr<std::vector<int64_t>> EvenSplit(const PipelineSplit& split, int64_t stages) {
  const int64_t layers = split.num_layers;
  const int64_t slots = split.slots();
  if (slots % stages != 0) {
    const std::string counted = slots == layers ? ""
                                                : absl::StrFormat(
                                                      " (%d with the embedding/loss counted by "
                                                      "--account-for-embedding-in-pipeline-split / "
                                                      "--account-for-loss-in-pipeline-split)",
                                                      slots);
    const int64_t ranks = split.pipeline_ranks;
    if (stages == ranks) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--num-layers %d%s is not divisible by --pipeline-model-parallel-size %d: every "
          "stage gets the same number of layers; choose --num-layers divisible by it, or set "
          "--decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers",
          layers, counted, ranks));
    }
    return absl::InvalidArgumentError(absl::StrFormat(
        "--num-layers %d%s is not divisible by --pipeline-model-parallel-size %d * "
        "--num-virtual-stages-per-pipeline-rank %d = %d: every virtual stage gets the same "
        "number of layers",
        layers, counted, ranks, stages / ranks, stages));
  }
  std::vector<int64_t> counts(stages, slots / stages);
  counts.front() -= split.embedding_counts;
  counts.back() -= split.loss_counts;
  if (counts.front() < 0 || counts.back() < 0) {
    return absl::InvalidArgumentError(
        "--account-for-embedding-in-pipeline-split / --account-for-loss-in-pipeline-split: a "
        "stage would hold fewer than zero layers; use more layers or fewer stages");
  }
  return counts;
}

}  // namespace

absl::StatusOr<std::vector<int64_t>> LayersPerStage(const PipelineSplit& split) {
  const int64_t stages = int64_t{split.pipeline_ranks} * std::max(1, split.virtual_stages);
  if (split.uneven()) return UnevenSplit(split, stages);
  return EvenSplit(split, stages);
}

}  // namespace conveyor
