// When to stop early, as Megatron's flags say: --exit-signal-handler (SIGTERM or
// SIGINT: finish the step, save, exit 0), --exit-interval (after an iteration divisible
// by it) and --exit-duration-in-mins (after that much wall-clock time). All ranks must
// stop after the same step, so the decision is agreed over the job's ranks.
#ifndef CONVEYOR_TRAINER_EXIT_CONDITIONS_H_
#define CONVEYOR_TRAINER_EXIT_CONDITIONS_H_

#include <chrono>
#include <string>

#include "absl/status/statusor.h"
#include "parallel/communicator.h"
#include "proto/config.pb.h"

namespace conveyor {

class ExitConditions {
 public:
  // Installs the signal handlers when --exit-signal-handler is set.
  explicit ExitConditions(const CheckpointConfig& config);

  // Whether to stop after `iteration`; `reason` says why. Every rank of `world` must
  // call it after every step when any condition is configured.
  absl::StatusOr<bool> ShouldExit(int64_t iteration, Communicator& world, std::string* reason);

 private:
  CheckpointConfig config_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_EXIT_CONDITIONS_H_
