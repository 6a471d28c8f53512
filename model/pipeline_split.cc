#include "model/pipeline_split.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace conveyor {

absl::StatusOr<std::vector<int64_t>> LayersPerStage(const Config& config) {
  const ParallelConfig& p = config.parallel();
  const int64_t layers = config.model().num_layers();
  const int64_t ranks = p.pipeline_model_parallel_size();
  const int64_t chunks = std::max(1, p.num_virtual_stages_per_pipeline_rank());
  const int64_t stages = ranks * chunks;
  const int64_t first = p.decoder_first_pipeline_num_layers();
  const int64_t last = p.decoder_last_pipeline_num_layers();
  std::vector<int64_t> counts(stages, 0);

  if (first > 0 || last > 0) {
    if (chunks > 1) {
      return absl::InvalidArgumentError(
          "--decoder-first/last-pipeline-num-layers: not supported with virtual pipeline "
          "stages; split the layers evenly or use one chunk per rank");
    }
    const int64_t inner_stages = stages - (first > 0) - (last > 0);
    const int64_t rest = layers - first - last;
    if (rest < 0 || (inner_stages == 0 ? rest != 0 : rest % inner_stages != 0)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--num-layers %d with --decoder-first-pipeline-num-layers %d and "
          "--decoder-last-pipeline-num-layers %d leaves %d layers for %d middle stages: "
          "choose values so that the rest divides evenly",
          layers, first, last, rest, inner_stages));
    }
    const int64_t each = inner_stages == 0 ? 0 : rest / inner_stages;
    std::fill(counts.begin(), counts.end(), each);
    if (first > 0) counts.front() = first;
    if (last > 0) counts.back() = last;
    return counts;
  }

  const bool embedding = p.account_for_embedding_in_pipeline_split();
  const bool loss = p.account_for_loss_in_pipeline_split();
  const int64_t slots = layers + embedding + loss;
  if (slots % stages != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--num-layers %d%s%s = %d does not divide into %d pipeline stages "
        "(--pipeline-model-parallel-size %d x %d virtual stages): choose sizes that divide",
        layers, embedding ? " + 1 (embedding)" : "", loss ? " + 1 (loss)" : "", slots, stages,
        ranks, chunks));
  }
  std::fill(counts.begin(), counts.end(), slots / stages);
  counts.front() -= embedding;
  counts.back() -= loss;
  if (counts.front() < 0 || counts.back() < 0) {
    return absl::InvalidArgumentError(
        "--account-for-embedding/loss-in-pipeline-split: a stage would hold fewer than zero "
        "layers; use more layers or fewer stages");
  }
  return counts;
}

}  // namespace conveyor
