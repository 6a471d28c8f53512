#include "trainer/evaluation.h"

#include <cmath>

#include "absl/strings/str_format.h"
#include "parallel/pipeline/executor.h"
#include "parallel/pipeline/forward_only.h"
#include "runtime/status_macros.h"
#include "trainer/micro_batch_feed.h"

namespace conveyor {

absl::StatusOr<double> Evaluate(const Config& config, GptStage* stage, const SampleSource& valid,
                                int64_t first_sample, const RankPlace& place) {
  const TrainingConfig& t = config.training();
  const int M = t.num_micro_batches();
  const pipeline::ExecutorPlace& pipe = place.pipeline;
  const std::vector<pipeline::Action> actions =
      pipeline::ForwardOnlyActions(pipe.layout, pipe.num_ranks, pipe.num_chunks, M, pipe.rank);
  double loss_sum = 0.0;
  for (int64_t step = 0; step < config.data().eval_iters(); ++step) {
    const int64_t step_first = first_sample + step * t.global_batch_size();
    stage->BeginStep(MakeMicroBatchFeed(valid, /*iteration=*/0, step_first, /*training=*/false,
                                        t.micro_batch_size(), config.model().seq_length(),
                                        place.dp_rank, place.dp_size),
                     int64_t{t.micro_batch_size()} * config.model().seq_length(), 1.0f);
    RETURN_IF_ERROR(pipeline::RunActions(actions, pipe, *stage, place.pp, nullptr));
    stage->DiscardStashes();
    loss_sum += stage->loss_sum();
  }
  if (place.pp != nullptr) RETURN_IF_ERROR(place.pp->AllReduceSum(&loss_sum, 1));
  if (place.groups.dp != nullptr) RETURN_IF_ERROR(place.groups.dp->AllReduceSum(&loss_sum, 1));
  return loss_sum / static_cast<double>(config.data().eval_iters() * M * place.dp_size);
}

std::string FormatValidationLine(int64_t iteration, double loss) {
  const std::string dashes(100, '-');
  return absl::StrFormat(
      "%s\n validation loss at iteration %d | lm loss value: %.6E | lm loss PPL: %.6E |\n%s",
      dashes, iteration, loss, std::exp(std::min(loss, 20.0)), dashes);
}

}  // namespace conveyor
