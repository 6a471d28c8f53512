// The pipeline's predicted and measured behaviour, side by side (docs/design.md
// §6): the closed-form bubble (§10), the simulator's bubble for the same action
// lists and costs, and the bubble each rank measured while running them.
#ifndef CONVEYOR_TRAINER_PLANNING_PIPELINE_REPORT_H_
#define CONVEYOR_TRAINER_PLANNING_PIPELINE_REPORT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/memory_model.h"
#include "parallel/communicator.h"
#include "parallel/pipeline/schedule.h"
#include "parallel/pipeline/simulator.h"
#include "parallel/pipeline/timeline.h"
#include "proto/config.pb.h"
#include "trainer/config/resolved_config.h"

namespace conveyor {

// "f,b,w": three positive relative costs (--pipeline-costs).
absl::StatusOr<pipeline::Costs> ParsePipelineCosts(const std::string& text);

struct BubblePrediction {
  double formula = 0;    // the schedule's closed form (docs/design.md §10)
  double simulated = 0;  // the simulator, with --pipeline-costs
  // The micro-batches simulated: M, or fewer for a very large M
  // (pipeline::SimulatedMicroBatches); `simulated` and `simulation` are theirs.
  int simulated_micro_batches = 0;
  pipeline::SimulationResult simulation;
};

// For the run's schedule, P, V and M: the formula for M, the simulation for
// simulated_micro_batches.
absl::StatusOr<BubblePrediction> PredictBubble(const ResolvedConfig& resolved);

// Memory per pipeline rank (model/memory_model.h) for the config's M micro-batches,
// from `prediction`'s simulation, which may hold fewer.
absl::StatusOr<std::vector<RankMemory>> PredictRunMemory(const ResolvedConfig& resolved,
                                                         const BubblePrediction& prediction);

// A rank's measured bubble over the steps it has seen: idle / wall-clock of the
// executor's run, where busy is the time in compute actions.
class BubbleMeter {
 public:
  void AddStep(const std::vector<pipeline::TimedAction>& step, double step_seconds);
  double fraction() const { return wall_ > 0 ? 1.0 - busy_ / wall_ : 0.0; }
  void Reset() { busy_ = wall_ = 0; }

 private:
  double busy_ = 0;
  double wall_ = 0;
};

// "pipeline bubble (%): predicted 30.4 (formula), 30.4 (simulated) | measured 31.0 29.2
// ..." with every pipeline rank's measured bubble (gathered over `pp`, which every
// pipeline rank must call with); `all_measured`, if not null, receives them.
absl::StatusOr<std::string> BubbleLine(const BubblePrediction& prediction, double measured,
                                       Communicator& pp,
                                       std::vector<double>* all_measured = nullptr);

// Writes `timeline` (this rank's actions, times in seconds on a clock every local rank
// shares) so that rank 0 of `world` can merge all ranks into one Chrome trace at
// `path`. Every rank of `world` must call.
absl::Status WriteMergedTrace(const std::string& path,
                              const std::vector<pipeline::TimedAction>& timeline,
                              Communicator& world);

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_PLANNING_PIPELINE_REPORT_H_
