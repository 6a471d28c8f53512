#include "parallel/pipeline/rehearsal_stage.h"

#include <chrono>
#include <thread>

namespace conveyor {
namespace pipeline {

Tensor RehearsalStage::Work(double units) const {
  // Sleep, not spin: ranks may share cores (4 ranks on 2 here), and a spinning rank
  // would steal them from the others. Linux's high-resolution timers overshoot a
  // sleep by tens of microseconds, well under 1% of a millisecond-sized unit.
  std::this_thread::sleep_until(std::chrono::steady_clock::now() +
                                std::chrono::duration<double>(units * seconds_per_unit_));
  return Tensor::Zeros({boundary_elements_}, MemoryCategory::kActivations);
}

absl::StatusOr<Tensor> RehearsalStage::Forward(int, int, Tensor) { return Work(costs_.forward); }

absl::StatusOr<Tensor> RehearsalStage::BackwardInput(int, int, Tensor) {
  return Work(costs_.backward_input);
}

absl::Status RehearsalStage::BackwardWeight(int, int) {
  Work(costs_.backward_weight);
  return absl::OkStatus();
}

}  // namespace pipeline
}  // namespace conveyor
