// The per-interval training report: Megatron's log line (so existing log parsers keep
// working) plus tokens/s, and the same numbers as one JSON object per line.
#ifndef CONVEYOR_TRAINER_REPORTING_TRAINING_LOG_H_
#define CONVEYOR_TRAINER_REPORTING_TRAINING_LOG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace conveyor {

// A mixture of experts' figures (trainer/reporting/moe_metrics.h): of one step, or averaged over
// an interval's.
struct MoeStepFigures {
  // The router's losses without their coefficients, by the names Megatron logs them
  // under, in its order: load_balancing_loss, seq_load_balancing_loss and
  // global_load_balancing_loss for the --moe-router-load-balancing-type types listed,
  // then z_loss.
  std::vector<std::pair<std::string, double>> losses;
  int64_t min_tokens_per_expert = 0;
  int64_t max_tokens_per_expert = 0;
  int64_t dropped_tokens = 0;
};

// Averages over the iterations since the previous report.
struct IntervalStats {
  int64_t iteration = 0;
  int64_t train_iters = 0;
  int64_t consumed_samples = 0;
  double ms_per_iteration = 0.0;
  double tflops_per_gpu = 0.0;
  double tokens_per_second = 0.0;
  double learning_rate = 0.0;
  int64_t global_batch_size = 0;
  double lm_loss = 0.0;            // mean over the interval's non-skipped iterations
  double grad_norm = 0.0;          // of the last iteration
  std::optional<int64_t> num_zeros;  // of the last iteration, with --log-num-zeros-in-grad
  int64_t skipped_iterations = 0;  // in this interval
  int64_t nan_iterations = 0;      // in this interval
  // --num-experts: the losses averaged over the interval, the load of its last iteration.
  std::optional<MoeStepFigures> moe;
  // --mtp-num-layers: each depth's loss (mtp_<k> loss), averaged as lm_loss is.
  std::vector<double> mtp_losses;
};

// Megatron's name of depth k's loss (1-based): "mtp_<k> loss".
std::string MtpLossName(int64_t depth);

std::string FormatLogLine(const IntervalStats& stats);
std::string FormatMetricsJson(const IntervalStats& stats);
// A validation (or test) loss at `iteration` as one JSON object, under `key`.
std::string FormatValidationJson(int64_t iteration, double loss,
                                 absl::string_view key = "valid_lm_loss");

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_REPORTING_TRAINING_LOG_H_
