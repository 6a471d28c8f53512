// Phase timers of the training step, summed over a log interval and reported as the
// min and max across ranks, as Megatron's timers are:
//   (min, max) time across ranks (ms): forward-backward (12.1, 12.9) | grads-reduce ...
// The spread between ranks shows imbalance; grads-reduce is the gradient-sync cost.
#ifndef CONVEYOR_TRAINER_REPORTING_STEP_TIMERS_H_
#define CONVEYOR_TRAINER_REPORTING_STEP_TIMERS_H_

#include <array>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "parallel/communicator.h"

namespace conveyor {

class StepTimers {
 public:
  enum Phase { kForwardBackward, kGradsReduce, kOptimizer, kNumPhases };

  // Adds the time from construction to destruction to a phase.
  class Scope {
   public:
    Scope(StepTimers* timers, Phase phase)
        : timers_(timers), phase_(phase), start_(std::chrono::steady_clock::now()) {}
    ~Scope() {
      timers_->seconds_[phase_] +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    }

   private:
    StepTimers* timers_;
    Phase phase_;
    std::chrono::steady_clock::time_point start_;
  };

  // Mean ms per iteration of each phase over `iterations`, min and max over `world`
  // (every rank of it must call). Resets the sums. `max_seconds`, if not null,
  // receives each phase's name and max in seconds (Megatron's TensorBoard timers).
  absl::StatusOr<std::string> Report(
      Communicator& world, int64_t iterations,
      std::vector<std::pair<std::string, double>>* max_seconds = nullptr);

 private:
  std::array<double, kNumPhases> seconds_{};
};

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_REPORTING_STEP_TIMERS_H_
