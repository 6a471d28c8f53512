#include "trainer/evaluation.h"

#include <cmath>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "parallel/pipeline/executor.h"
#include "parallel/pipeline/forward_only.h"
#include "runtime/status_macros.h"
#include "trainer/micro_batch_feed.h"
#include "trainer/training_log.h"

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

std::string FormatValidationLine(absl::string_view at, double loss) {
  const std::string dashes(100, '-');
  return absl::StrFormat(
      "%s\n validation loss at %s | lm loss value: %.6E | lm loss PPL: %.6E |\n%s", dashes, at,
      loss, std::exp(std::min(loss, 20.0)), dashes);
}

absl::Status EvaluateAfterTraining(const Config& config, GptStage* stage, int64_t iteration,
                                   const EvaluationSplits& held_out, const RankPlace& place,
                                   const TrainingOutputs& out, TrainingResult* result) {
  const DataConfig& data = config.data();
  if (data.eval_iters() <= 0) return absl::OkStatus();
  const int64_t batches = data.eval_iters() * int64_t{config.training().global_batch_size()};
  struct Split {
    const SampleSource* source;
    int64_t first_sample;
    const char* name;  // as Megatron's log says it
    const char* json_key;
    std::optional<double>* loss;
  };
  const Split splits[] = {
      {held_out.valid, iteration / data.eval_interval() * batches, "validation",
       "final_valid_lm_loss", &result->final_valid_loss},
      {held_out.test, 0, "test", "test_lm_loss", &result->test_loss},
  };
  for (const Split& split : splits) {
    if (split.source == nullptr) continue;
    ASSIGN_OR_RETURN(const double loss,
                     Evaluate(config, stage, *split.source, split.first_sample, place));
    *split.loss = loss;
    if (out.log != nullptr) {
      *out.log << FormatValidationLine(
                      absl::StrCat("iteration ", iteration, " on ", split.name, " set"), loss)
               << std::endl;
    }
    if (out.metrics != nullptr) {
      *out.metrics << FormatValidationJson(iteration, loss, split.json_key) << std::endl;
    }
  }
  return absl::OkStatus();
}

}  // namespace conveyor
