#include "trainer/reporting/interval_log.h"

#include <cmath>
#include <utility>

#include "base/status_macros.h"
#include "trainer/reporting/line_file.h"

namespace conveyor {

void IntervalLog::AddStep(const StepOutcome& step, double seconds) {
  seconds_ += seconds;
  ++iterations_;
  samples_ += step.global_batch;
  if (step.moe.has_value()) {
    moe_losses_.resize(step.moe->losses.size(), 0.0);
    for (size_t i = 0; i < step.moe->losses.size(); ++i) {
      moe_losses_[i] += step.moe->losses[i].second;
    }
  }
  if (step.applied) {
    loss_ += step.loss;
    mtp_losses_.resize(step.mtp_losses.size(), 0.0);
    for (size_t k = 0; k < step.mtp_losses.size(); ++k) mtp_losses_[k] += step.mtp_losses[k];
    ++applied_iterations_;
  } else {
    ++skipped_iterations_;
  }
}

bool IntervalLog::Due(int64_t iteration) const {
  return iteration % config_.logging().log_interval() == 0 ||
         iteration == config_.training().train_iters();
}

IntervalStats IntervalLog::Stats(int64_t iteration, int64_t consumed_samples,
                                 const StepOutcome& last) const {
  const double seconds_per_iteration = seconds_ / iterations_;
  const int64_t world = context_.world().size();
  IntervalStats stats;
  stats.iteration = iteration;
  stats.train_iters = config_.training().train_iters();
  stats.consumed_samples = consumed_samples;
  stats.ms_per_iteration = 1e3 * seconds_per_iteration;
  // Under --rampup-batch-size the steps' batches differ: FLOPs scale with the batch.
  const double mean_batch = static_cast<double>(samples_) / iterations_;
  stats.tflops_per_gpu = flops_per_iteration_ * mean_batch /
                         config_.training().global_batch_size() / seconds_per_iteration / world /
                         1e12;
  stats.tokens_per_second = mean_batch * config_.model().seq_length() / seconds_per_iteration;
  stats.learning_rate = last.learning_rate;
  stats.global_batch_size = last.global_batch;  // Megatron logs the current one
  stats.lm_loss = applied_iterations_ > 0 ? loss_ / applied_iterations_ : NAN;
  for (const double sum : mtp_losses_) {
    stats.mtp_losses.push_back(applied_iterations_ > 0 ? sum / applied_iterations_ : NAN);
  }
  stats.grad_norm = last.grad_norm;
  stats.num_zeros = last.num_zeros;
  // A step that was not applied is both counted as NaN and skipped (--nan-policy skip).
  stats.skipped_iterations = stats.nan_iterations = skipped_iterations_;
  stats.moe = last.moe;
  if (stats.moe.has_value()) {
    for (size_t i = 0; i < stats.moe->losses.size(); ++i) {
      stats.moe->losses[i].second = moe_losses_[i] / iterations_;
    }
  }
  return stats;
}

void IntervalLog::WriteTensorBoard(const IntervalStats& stats,
                                   std::vector<std::pair<std::string, double>> timer_seconds,
                                   const IntervalBubble* bubble) const {
  tensorboard::IntervalFigures figures;
  figures.iteration = stats.iteration;
  figures.seconds_per_iteration = stats.ms_per_iteration / 1e3;
  figures.tflops_per_gpu = stats.tflops_per_gpu;
  figures.tokens_per_second = stats.tokens_per_second;
  figures.skipped_iterations = stats.skipped_iterations;
  figures.nan_iterations = stats.nan_iterations;
  figures.timer_seconds = std::move(timer_seconds);
  if (bubble != nullptr) {
    figures.bubble_formula = bubble->formula;
    figures.bubble_simulated = bubble->simulated;
    figures.bubble_measured = bubble->measured;
  }
  if (stats.moe.has_value()) figures.moe_losses = stats.moe->losses;
  for (size_t k = 0; k < stats.mtp_losses.size(); ++k) {
    figures.mtp_losses.emplace_back(MtpLossName(static_cast<int64_t>(k) + 1), stats.mtp_losses[k]);
  }
  out_.tensorboard->Interval(figures);
}

absl::Status IntervalLog::Report(int64_t iteration, int64_t consumed_samples,
                                 const StepOutcome& last, const IntervalBubble* bubble) {
  const IntervalStats stats = Stats(iteration, consumed_samples, last);
  std::vector<std::pair<std::string, double>> timer_seconds;
  ASSIGN_OR_RETURN(const std::string timer_line,
                   timers_.Report(context_.world(), iterations_, &timer_seconds));
  ASSIGN_OR_RETURN(const std::string messages_line, message_bytes_.Report(iterations_));
  if (out_.log != nullptr) {
    *out_.log << FormatLogLine(stats) << "\n"
              << timer_line << "\n"
              << messages_line << "\n"
              << (bubble != nullptr ? bubble->line + "\n" : "") << std::flush;
  }
  if (out_.metrics != nullptr) {
    RETURN_IF_ERROR(WriteLine(*out_.metrics, FormatMetricsJson(stats), "--metrics-file"));
  }
  if (out_.tensorboard != nullptr) WriteTensorBoard(stats, std::move(timer_seconds), bubble);
  seconds_ = loss_ = 0.0;
  moe_losses_.clear();
  mtp_losses_.clear();
  iterations_ = applied_iterations_ = skipped_iterations_ = samples_ = 0;
  return absl::OkStatus();
}

}  // namespace conveyor
