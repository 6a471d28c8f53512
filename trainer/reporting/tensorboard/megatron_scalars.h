// What a training run logs to TensorBoard, under Megatron's tags (megatron/training/
// training.py's training_log and evaluate_and_print_results), so that dashboards and
// scripts written for Megatron's runs read Conveyor's unchanged:
//  - every --tensorboard-log-interval iterations, that iteration's figures against the
//    iteration and, as "<tag> vs samples", against the consumed samples;
//  - every --log-interval iterations, the log line's interval figures (throughput,
//    skipped and NaN iterations, with --log-timers-to-tensorboard the phase times);
//  - after each evaluation, the validation (or test) loss and, with
//    --log-validation-ppl-to-tensorboard, its perplexity.
// Tags Megatron does not have are Conveyor's own figures: "tokens-per-second",
// "skipped-iterations", "nan-iterations", "pipeline-bubble ..." and the per-category
// "mem-<category>-bytes".
#ifndef CONVEYOR_TRAINER_REPORTING_TENSORBOARD_MEGATRON_SCALARS_H_
#define CONVEYOR_TRAINER_REPORTING_TENSORBOARD_MEGATRON_SCALARS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/config.pb.h"
#include "trainer/reporting/tensorboard/scalar_writer.h"

namespace conveyor::tensorboard {

struct IterationFigures {
  int64_t iteration = 0;
  int64_t consumed_samples = 0;  // after this iteration
  double lm_loss = 0.0;
  double learning_rate = 0.0;
  double grad_norm = 0.0;
  int64_t global_batch_size = 0;
  int world_size = 0;
  std::optional<double> params_norm;  // with --log-params-norm
  std::optional<int64_t> num_zeros;   // with --log-num-zeros-in-grad
  // With --log-memory-to-tensorboard: (name, bytes) such as ("allocated", 1.2e9),
  // logged as "mem-<name>-bytes".
  std::vector<std::pair<std::string, double>> memory_bytes;
};

struct IntervalFigures {
  int64_t iteration = 0;
  double seconds_per_iteration = 0.0;
  double tflops_per_gpu = 0.0;
  double tokens_per_second = 0.0;
  int64_t skipped_iterations = 0;  // in the interval
  int64_t nan_iterations = 0;      // in the interval
  // (timer name, max over ranks of its mean seconds per iteration), as
  // Megatron's timers write them ("<name>-time").
  std::vector<std::pair<std::string, double>> timer_seconds;
  // With a pipeline: the predicted bubble fractions and each pipeline rank's measured one.
  std::optional<double> bubble_formula;
  std::optional<double> bubble_simulated;
  std::vector<double> bubble_measured;
  // --num-experts: Megatron's router losses (load_balancing_loss,
  // seq_load_balancing_loss, global_load_balancing_loss as listed, z_loss), averaged over
  // the interval.
  std::vector<std::pair<std::string, double>> moe_losses;
  // --mtp-num-layers: Megatron's "mtp_<k> loss" of each depth, averaged over the interval.
  std::vector<std::pair<std::string, double>> mtp_losses;
};

class MegatronScalars {
 public:
  // A new event file in --tensorboard-dir and its writer thread (ScalarWriter::Start),
  // for the switches of `logging`, which must outlive this.
  static absl::StatusOr<std::unique_ptr<MegatronScalars>> Start(const LoggingConfig& logging);
  MegatronScalars(const LoggingConfig& logging, std::unique_ptr<ScalarWriter> writer)
      : logging_(logging), writer_(std::move(writer)) {}

  // Writes only on iterations that are multiples of --tensorboard-log-interval.
  void Iteration(const IterationFigures& f);
  void Interval(const IntervalFigures& f);
  // `split` is "validation" or "test".
  void Evaluation(const std::string& split, double loss, int64_t iteration,
                  int64_t consumed_samples);

  // Writes what is queued (ScalarWriter::Close); then one line for the log: which
  // rank (`rank`) wrote the events where, and how many scalars were dropped, if any.
  absl::StatusOr<std::string> Close(int rank);

 private:
  // `value` under `tag` at `iteration` and under "<tag> vs samples" at `samples`.
  void AddBoth(const std::string& tag, double value, int64_t iteration, int64_t samples);

  const LoggingConfig& logging_;
  const std::unique_ptr<ScalarWriter> writer_;
};

}  // namespace conveyor::tensorboard

#endif  // CONVEYOR_TRAINER_REPORTING_TENSORBOARD_MEGATRON_SCALARS_H_
