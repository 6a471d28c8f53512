// The report of every --log-interval iterations and of the last: Megatron's log line, the
// phase timers, the bytes per group, the pipeline bubble, the JSON metrics line and
// TensorBoard's interval scalars, each over the steps since the previous report. The
// training loop adds its steps here and keeps only the step itself.
#ifndef CONVEYOR_TRAINER_REPORTING_INTERVAL_LOG_H_
#define CONVEYOR_TRAINER_REPORTING_INTERVAL_LOG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "proto/config.pb.h"
#include "trainer/rank_context.h"
#include "trainer/reporting/message_bytes.h"
#include "trainer/reporting/step_timers.h"
#include "trainer/reporting/training_log.h"
#include "trainer/reporting/training_outputs.h"

namespace conveyor {

// What one step measured.
struct StepOutcome {
  double loss = 0.0;  // mean over micro-batches and DP ranks
  double grad_norm = 0.0;
  std::optional<int64_t> num_zeros;  // --log-num-zeros-in-grad
  double learning_rate = 0.0;
  double decoupled_learning_rate = 0.0;  // --decoupled-lr's group
  std::optional<MoeStepFigures> moe;     // --num-experts
  std::vector<double> mtp_losses;        // --mtp-num-layers: each depth's
  int64_t global_batch = 0;              // this step's (--rampup-batch-size)
  // False when a NaN or inf loss or gradient norm left the weights as they were
  // (--nan-policy skip; under stop the run ends at such a step).
  bool applied = true;
};

// A pipelined run's bubble over the interval (planning/pipeline_report's BubbleLine).
struct IntervalBubble {
  std::string line;
  double formula = 0.0;
  double simulated = 0.0;
  std::vector<double> measured;  // each pipeline rank's
};

class IntervalLog {
 public:
  // `config`, `context` and `out` must outlive this. `flops_per_iteration` is Megatron's
  // count for a step of --global-batch-size. Counts messages from now on.
  IntervalLog(const Config& config, const RankContext& context, const TrainingOutputs& out,
              double flops_per_iteration)
      : config_(config),
        context_(context),
        out_(out),
        flops_per_iteration_(flops_per_iteration),
        message_bytes_(context) {}

  // The phase timers the step runs under.
  StepTimers& timers() { return timers_; }

  // Adds a step that took `seconds`.
  void AddStep(const StepOutcome& step, double seconds);

  // Whether iteration `iteration` ends an interval: every --log-interval-th, and the last.
  bool Due(int64_t iteration) const;

  // Writes the interval's report, `last` being its last step, and starts the next
  // interval. `bubble` is null without a pipeline. A collective over the world group:
  // every rank calls.
  absl::Status Report(int64_t iteration, int64_t consumed_samples, const StepOutcome& last,
                      const IntervalBubble* bubble);

 private:
  // Megatron's averages over the interval.
  IntervalStats Stats(int64_t iteration, int64_t consumed_samples, const StepOutcome& last) const;
  void WriteTensorBoard(const IntervalStats& stats,
                        std::vector<std::pair<std::string, double>> timer_seconds,
                        const IntervalBubble* bubble) const;

  const Config& config_;
  const RankContext& context_;
  const TrainingOutputs& out_;
  const double flops_per_iteration_;
  StepTimers timers_;
  MessageBytes message_bytes_;
  // Sums since the last report.
  double seconds_ = 0.0;
  double loss_ = 0.0;  // over the steps that were applied
  int64_t iterations_ = 0;
  int64_t applied_iterations_ = 0;
  int64_t skipped_iterations_ = 0;
  int64_t samples_ = 0;  // the steps' global batches
  std::vector<double> moe_losses_;  // MoeStepFigures::losses' sums
  std::vector<double> mtp_losses_;  // per depth, over the steps that were applied
};

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_REPORTING_INTERVAL_LOG_H_
