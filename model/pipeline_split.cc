#include "model/pipeline_split.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace conveyor {
namespace {

absl::StatusOr<std::vector<int64_t>> UnevenSplit(const Config& config, int64_t stages) {
  const ParallelConfig& p = config.parallel();
  const int64_t layers = config.model().num_layers();
  const int64_t first = p.decoder_first_pipeline_num_layers();
  const int64_t last = p.decoder_last_pipeline_num_layers();
  if (stages != p.pipeline_model_parallel_size()) {
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

absl::StatusOr<std::vector<int64_t>> EvenSplit(const Config& config, int64_t stages) {
  const ParallelConfig& p = config.parallel();
  const int64_t layers = config.model().num_layers();
  const bool embedding = p.account_for_embedding_in_pipeline_split();
  const bool loss = p.account_for_loss_in_pipeline_split();
  const int64_t slots = SplitSlots(config);
  if (slots % stages != 0) {
    const std::string counted = slots == layers ? ""
                                                : absl::StrFormat(
                                                      " (%d with the embedding/loss counted by "
                                                      "--account-for-embedding-in-pipeline-split / "
                                                      "--account-for-loss-in-pipeline-split)",
                                                      slots);
    const int64_t ranks = p.pipeline_model_parallel_size();
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
  counts.front() -= embedding;
  counts.back() -= loss;
  if (counts.front() < 0 || counts.back() < 0) {
    return absl::InvalidArgumentError(
        "--account-for-embedding-in-pipeline-split / --account-for-loss-in-pipeline-split: a "
        "stage would hold fewer than zero layers; use more layers or fewer stages");
  }
  return counts;
}

}  // namespace

absl::StatusOr<std::vector<int64_t>> LayersPerStage(const Config& config) {
  const ParallelConfig& p = config.parallel();
  const int64_t stages = int64_t{p.pipeline_model_parallel_size()} *
                         std::max(1, p.num_virtual_stages_per_pipeline_rank());
  if (IsUnevenSplit(p)) return UnevenSplit(config, stages);
  return EvenSplit(config, stages);
}

bool IsUnevenSplit(const ParallelConfig& parallel) {
  return parallel.decoder_first_pipeline_num_layers() > 0 ||
         parallel.decoder_last_pipeline_num_layers() > 0;
}

int64_t SplitSlots(const Config& config) {
  const ParallelConfig& p = config.parallel();
  return int64_t{config.model().num_layers()} +
         (p.account_for_embedding_in_pipeline_split() ? 1 : 0) +
         (p.account_for_loss_in_pipeline_split() ? 1 : 0);
}

}  // namespace conveyor
