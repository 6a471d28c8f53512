#include "trainer/evaluation.h"

#include <cmath>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "parallel/pipeline/forward_only.h"
#include "trainer/pipeline_pass.h"
#include "trainer/reporting/line_file.h"
#include "trainer/reporting/training_log.h"

namespace conveyor {

absl::StatusOr<double> Evaluate(const ResolvedConfig& config, const RankContext& context,
                                GptStage* stage, const SampleSource& split, int64_t first_sample) {
  const std::vector<pipeline::Action> actions =
      pipeline::ForwardOnlyActions(context.pipeline(), config.micro_batches());
  MaskedLoss loss;
  for (int64_t step = 0; step < config.config().data().eval_iters(); ++step) {
    const PassInput input{&split,
                          first_sample + step * config.config().training().global_batch_size()};
    RETURN_IF_ERROR(RunPipelinePass(config, context, actions, input, LossWeighting(),
                                    stage, /*timeline=*/nullptr));
    stage->DiscardStashes();
    loss += stage->loss();
  }
  return MeanLossOverRanks(loss, context);
}

int64_t EvaluationFirstSample(const ResolvedConfig& config, int64_t evaluation) {
  const Config& c = config.config();
  return evaluation * c.data().eval_iters() * c.training().global_batch_size();
}

std::string FormatValidationLine(absl::string_view at, double loss) {
  const std::string dashes(100, '-');
  return absl::StrFormat(
      "%s\n validation loss at %s | lm loss value: %.6E | lm loss PPL: %.6E |\n%s", dashes, at,
      loss, std::exp(std::min(loss, 20.0)), dashes);
}

absl::Status EvaluateDuringTraining(const ResolvedConfig& config, const RankContext& context,
                                    GptStage* stage, const SampleSource* valid, int64_t iteration,
                                    const TrainingOutputs& out, TrainingResult* result) {
  const DataConfig& data = config.config().data();
  if (valid == nullptr || data.eval_iters() <= 0 || iteration % data.eval_interval() != 0) {
    return absl::OkStatus();
  }
  const int64_t evaluation = iteration / data.eval_interval() - 1;
  ASSIGN_OR_RETURN(const double loss, Evaluate(config, context, stage, *valid,
                                               EvaluationFirstSample(config, evaluation)));
  result->valid_losses.push_back(loss);
  if (out.log != nullptr) {
    *out.log << FormatValidationLine(absl::StrCat("iteration ", iteration), loss) << std::endl;
  }
  if (out.metrics != nullptr) {
    RETURN_IF_ERROR(
        WriteLine(*out.metrics, FormatValidationJson(iteration, loss), "--metrics-file"));
  }
  if (out.tensorboard != nullptr) {
    out.tensorboard->Evaluation("validation", loss, iteration, result->consumed_samples);
  }
  return absl::OkStatus();
}

absl::Status EvaluateAfterTraining(const ResolvedConfig& config, const RankContext& context,
                                   GptStage* stage, int64_t iteration,
                                   const EvaluationSplits& held_out, const TrainingOutputs& out,
                                   TrainingResult* result) {
  const DataConfig& data = config.config().data();
  if (data.eval_iters() <= 0) return absl::OkStatus();
  struct Split {
    const SampleSource* source;
    int64_t first_sample;
    const char* name;  // as Megatron's log says it
    const char* json_key;
    std::optional<double>* loss;
  };
  const Split splits[] = {
      {held_out.valid, EvaluationFirstSample(config, iteration / data.eval_interval()),
       "validation", "final_valid_lm_loss", &result->final_valid_loss},
      {held_out.test, 0, "test", "test_lm_loss", &result->test_loss},
  };
  for (const Split& split : splits) {
    if (split.source == nullptr) continue;
    ASSIGN_OR_RETURN(const double loss,
                     Evaluate(config, context, stage, *split.source, split.first_sample));
    *split.loss = loss;
    if (out.log != nullptr) {
      *out.log << FormatValidationLine(
                      absl::StrCat("iteration ", iteration, " on ", split.name, " set"), loss)
               << std::endl;
    }
    if (out.metrics != nullptr) {
      RETURN_IF_ERROR(WriteLine(*out.metrics, FormatValidationJson(iteration, loss, split.json_key),
                                "--metrics-file"));
    }
    if (out.tensorboard != nullptr) {
      out.tensorboard->Evaluation(split.name, loss, iteration, result->consumed_samples);
    }
  }
  return absl::OkStatus();
}

}  // namespace conveyor
