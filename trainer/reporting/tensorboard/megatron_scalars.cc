#include "trainer/reporting/tensorboard/megatron_scalars.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace conveyor::tensorboard {

absl::StatusOr<std::unique_ptr<MegatronScalars>> MegatronScalars::Start(
    const LoggingConfig& logging) {
  ASSIGN_OR_RETURN(
      std::unique_ptr<ScalarWriter> writer,
      ScalarWriter::Start(logging.tensorboard_dir(), logging.tensorboard_queue_size()));
  return std::make_unique<MegatronScalars>(logging, std::move(writer));
}

absl::StatusOr<std::string> MegatronScalars::Close(int rank) {
  RETURN_IF_ERROR(writer_->Close());
  std::string line =
      absl::StrCat("conveyor: rank ", rank, " wrote TensorBoard events to ", writer_->path());
  if (writer_->dropped() > 0) {
    absl::StrAppend(&line, " (", writer_->dropped(),
                    " scalars dropped: the disk fell behind the queue; raise "
                    "--tensorboard-queue-size)");
  }
  return line;
}

void MegatronScalars::AddBoth(const std::string& tag, double value, int64_t iteration,
                              int64_t samples) {
  writer_->Add(tag, value, iteration);
  writer_->Add(absl::StrCat(tag, " vs samples"), value, samples);
}

void MegatronScalars::Iteration(const IterationFigures& f) {
  if (f.iteration % logging_.tensorboard_log_interval() != 0) return;
  const int64_t i = f.iteration;
  const int64_t samples = f.consumed_samples;
  writer_->Add("samples vs steps", static_cast<double>(samples), i);
  AddBoth("learning-rate", f.learning_rate, i, samples);
  AddBoth("batch-size", static_cast<double>(f.global_batch_size), i, samples);
  AddBoth("lm loss", f.lm_loss, i, samples);
  if (logging_.log_world_size_to_tensorboard()) {
    AddBoth("world-size", f.world_size, i, samples);
  }
  AddBoth("grad-norm", f.grad_norm, i, samples);
  if (f.num_zeros.has_value()) AddBoth("num-zeros", static_cast<double>(*f.num_zeros), i, samples);
  if (f.params_norm.has_value()) AddBoth("params-norm", *f.params_norm, i, samples);
  for (const auto& [name, bytes] : f.memory_bytes) {
    writer_->Add(absl::StrCat("mem-", name, "-bytes"), bytes, i);
  }
}

void MegatronScalars::Interval(const IntervalFigures& f) {
  const int64_t i = f.iteration;
  writer_->Add("throughput", f.tflops_per_gpu, i);  // TFLOP/s per GPU, as Megatron's
  writer_->Add("tokens-per-second", f.tokens_per_second, i);
  writer_->Add("skipped-iterations", static_cast<double>(f.skipped_iterations), i);
  writer_->Add("nan-iterations", static_cast<double>(f.nan_iterations), i);
  if (logging_.log_timers_to_tensorboard()) {
    writer_->Add("iteration-time", f.seconds_per_iteration, i);
    for (const auto& [name, seconds] : f.timer_seconds) {
      writer_->Add(absl::StrCat(name, "-time"), seconds, i);
    }
  }
  if (f.bubble_formula.has_value()) {
    writer_->Add("pipeline-bubble predicted (formula)", *f.bubble_formula, i);
  }
  if (f.bubble_simulated.has_value()) {
    writer_->Add("pipeline-bubble predicted (simulated)", *f.bubble_simulated, i);
  }
  for (size_t r = 0; r < f.bubble_measured.size(); ++r) {
    writer_->Add(absl::StrCat("pipeline-bubble measured/pp-rank-", r), f.bubble_measured[r], i);
  }
  for (const auto& [name, value] : f.moe_losses) writer_->Add(name, value, i);
  for (const auto& [name, value] : f.mtp_losses) writer_->Add(name, value, i);
}

void MegatronScalars::Evaluation(const std::string& split, double loss, int64_t iteration,
                                 int64_t consumed_samples) {
  const std::string tag = absl::StrCat("lm loss ", split);
  AddBoth(tag, loss, iteration, consumed_samples);
  if (logging_.log_validation_ppl_to_tensorboard()) {
    // Megatron's perplexity: exp(min(loss, 20)), which keeps a diverged loss finite.
    AddBoth(absl::StrCat(tag, " ppl"), std::exp(std::min(loss, 20.0)), iteration, consumed_samples);
  }
}

}  // namespace conveyor::tensorboard
