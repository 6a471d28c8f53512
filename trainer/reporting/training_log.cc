#include "trainer/reporting/training_log.h"

#include <cmath>

#include "absl/strings/str_format.h"

namespace conveyor {
namespace {

// JSON has no NaN or Infinity: write null so that every line stays parseable.
std::string JsonNumber(double value) {
  return std::isfinite(value) ? absl::StrFormat("%.9g", value) : "null";
}

// "mtp_1_loss": ..., per depth.
std::string MtpLossesJson(const std::vector<double>& losses) {
  std::string out;
  for (size_t k = 0; k < losses.size(); ++k) {
    absl::StrAppendFormat(&out, "\"mtp_%d_loss\": %s, ", k + 1, JsonNumber(losses[k]));
  }
  return out;
}

// "load_balancing_loss": ..., per router loss logged.
std::string MoeLossesJson(const MoeStepFigures& moe) {
  std::string out;
  for (const auto& [name, value] : moe.losses) {
    absl::StrAppendFormat(&out, "\"%s\": %s, ", name, JsonNumber(value));
  }
  return out;
}

}  // namespace

std::string MtpLossName(int64_t depth) { return absl::StrFormat("mtp_%d loss", depth); }

std::string FormatLogLine(const IntervalStats& s) {
  // Megatron's order: the count of zeros follows the gradient norm; the MoE losses, then
  // the multi-token prediction depths' follow the lm loss (Conveyor adds the experts'
  // load after them).
  const std::string zeros =
      s.num_zeros.has_value() ? absl::StrFormat(" num zeros: %.1f |", *s.num_zeros) : "";
  std::string moe;
  if (s.moe.has_value()) {
    for (const auto& [name, value] : s.moe->losses) {
      absl::StrAppendFormat(&moe, " %s: %.6E |", name, value);
    }
  }
  for (size_t k = 0; k < s.mtp_losses.size(); ++k) {
    absl::StrAppendFormat(&moe, " %s: %.6E |", MtpLossName(k + 1), s.mtp_losses[k]);
  }
  if (s.moe.has_value()) {
    absl::StrAppendFormat(&moe, " tokens per expert (min/max): %d/%d | dropped tokens: %d |",
                          s.moe->min_tokens_per_expert, s.moe->max_tokens_per_expert,
                          s.moe->dropped_tokens);
  }
  return absl::StrFormat(
      " iteration %8d/%8d | consumed samples: %12d | elapsed time per iteration (ms): %.1f | "
      "throughput per GPU (TFLOP/s/GPU): %.3f | tokens per second: %.1f | "
      "learning rate: %.6E | global batch size: %5d | lm loss: %.6E |%s grad norm: %.3f |%s "
      "number of skipped iterations: %3d | number of nan iterations: %3d |",
      s.iteration, s.train_iters, s.consumed_samples, s.ms_per_iteration, s.tflops_per_gpu,
      s.tokens_per_second, s.learning_rate, s.global_batch_size, s.lm_loss, moe, s.grad_norm,
      zeros, s.skipped_iterations, s.nan_iterations);
}

std::string FormatMetricsJson(const IntervalStats& s) {
  return absl::StrFormat(
      "{\"iteration\": %d, \"consumed_samples\": %d, \"ms_per_iteration\": %s, "
      "\"tflops_per_gpu\": %s, \"tokens_per_second\": %s, \"learning_rate\": %s, "
      "\"global_batch_size\": %d, \"lm_loss\": %s, \"grad_norm\": %s, %s%s%s"
      "\"skipped_iterations\": %d, \"nan_iterations\": %d}",
      s.iteration, s.consumed_samples, JsonNumber(s.ms_per_iteration), JsonNumber(s.tflops_per_gpu),
      JsonNumber(s.tokens_per_second), JsonNumber(s.learning_rate), s.global_batch_size,
      JsonNumber(s.lm_loss), JsonNumber(s.grad_norm),
      s.num_zeros.has_value() ? absl::StrFormat("\"num_zeros\": %d, ", *s.num_zeros) : "",
      s.moe.has_value()
          ? absl::StrFormat("%s\"min_tokens_per_expert\": %d, \"max_tokens_per_expert\": %d, "
                            "\"dropped_tokens\": %d, ",
                            MoeLossesJson(*s.moe), s.moe->min_tokens_per_expert,
                            s.moe->max_tokens_per_expert, s.moe->dropped_tokens)
          : "",
      MtpLossesJson(s.mtp_losses), s.skipped_iterations, s.nan_iterations);
}

std::string FormatValidationJson(int64_t iteration, double loss, absl::string_view key) {
  return absl::StrFormat("{\"iteration\": %d, \"%s\": %s}", iteration, key, JsonNumber(loss));
}

}  // namespace conveyor
